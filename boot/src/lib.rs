//! PVH boot stub for the onecopy kernel.
//!
//! QEMU's `-kernel` loader finds the `XEN_ELFNOTE_PHYS32_ENTRY` note (type
//! 18, name "Xen") and enters [`pvh_start32`](entry_address) in 32-bit
//! protected mode with paging off and `ebx` holding the physical address of
//! the `hvm_start_info` structure. The trampoline identity-maps the first
//! 4 GiB with 2 MiB pages, enables long mode, loads a 64-bit GDT, switches
//! to a boot stack and calls `kernel_entry(start_info_paddr)`, which the
//! kernel defines.
//!
//! The linker script is `boot/linker.ld` (the kernel's build script passes
//! it to the linker).
#![no_std]
// The crate is arch code: its one unsafe item is the trampoline's
// `global_asm!`, allowed where it stands.
#![deny(unsafe_code)]

/// Size of the boot stack the kernel runs on.
pub const BOOT_STACK_BYTES: usize = 512 * 1024;

/// The PVH note and the 32-to-64-bit trampoline.
#[allow(unsafe_code)]
mod trampoline {
    core::arch::global_asm!(
        r#"
    .pushsection .note.Xen, "a", @note
    .balign 4
    .long 4
    .long 4
    .long 18
    .asciz "Xen"
    .balign 4
    .long pvh_start32
    .balign 4

    .section .boot.text, "ax"
    .code32
    .global pvh_start32
pvh_start32:
    cli
    cld
    mov esi, ebx

    /* PML4[0] -> PDPT */
    mov eax, offset boot_pdpt
    or eax, 3
    mov dword ptr [boot_pml4], eax
    mov dword ptr [boot_pml4 + 4], 0

    /* PDPT[i] -> PD i, i = 0..3 */
    xor ecx, ecx
2:
    mov eax, ecx
    shl eax, 12
    add eax, offset boot_pd
    or eax, 3
    mov dword ptr [boot_pdpt + ecx * 8], eax
    mov dword ptr [boot_pdpt + ecx * 8 + 4], 0
    inc ecx
    cmp ecx, 4
    jne 2b

    /* 2048 x 2 MiB pages: identity map 0..4 GiB */
    xor ecx, ecx
3:
    mov eax, ecx
    shl eax, 21
    or eax, 0x83
    mov dword ptr [boot_pd + ecx * 8], eax
    mov eax, ecx
    shr eax, 11
    mov dword ptr [boot_pd + ecx * 8 + 4], eax
    inc ecx
    cmp ecx, 2048
    jne 3b

    /* PAE */
    mov eax, cr4
    or eax, 0x20
    mov cr4, eax
    mov eax, offset boot_pml4
    mov cr3, eax
    /* EFER.LME | EFER.NXE */
    mov ecx, 0xC0000080
    rdmsr
    or eax, 0x900
    wrmsr
    /* PG | PE | WP */
    mov eax, cr0
    or eax, 0x80010001
    mov cr0, eax

    lgdt [boot_gdt_ptr]
    push 0x08
    mov eax, offset pvh_start64
    push eax
    retf

    .code64
pvh_start64:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    mov rsp, offset boot_stack_top
    xor ebp, ebp
    mov edi, esi
    call kernel_entry
4:
    hlt
    jmp 4b

    .section .rodata
    .balign 16
boot_gdt:
    .quad 0
    .quad 0x00AF9A000000FFFF
    .quad 0x00CF92000000FFFF
boot_gdt_end:
    .balign 16
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .quad boot_gdt

    .section .bss.boot, "aw", @nobits
    .balign 4096
boot_pml4:
    .skip 4096
boot_pdpt:
    .skip 4096
boot_pd:
    .skip 4096 * 4
    .balign 16
    .global boot_stack_bottom
boot_stack_bottom:
    .skip 512 * 1024
    .global boot_stack_top
boot_stack_top:
    .popsection
    "#
    );
}

extern "C" {
    fn pvh_start32();
    static boot_stack_bottom: u8;
}

/// Physical address of the 32-bit PVH entry point (also forces the
/// trampoline's object file into the link).
pub fn entry_address() -> usize {
    pvh_start32 as *const () as usize
}

/// Lowest address of the boot stack (for stack-overflow reports).
pub fn stack_bottom() -> usize {
    core::ptr::addr_of!(boot_stack_bottom) as usize
}
