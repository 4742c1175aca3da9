//! GDT with a TSS whose first interrupt stack serves double faults, so a
//! kernel stack overflow still produces a readable report.

use spin::Once;
use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;
use x86_64::VirtAddr;

/// IST index used by the double-fault handler.
pub const DOUBLE_FAULT_IST: u16 = 0;

const DF_STACK_BYTES: usize = 32 * 1024;
#[repr(align(16))]
#[allow(dead_code)] // only its address is used: the CPU writes it
struct Stack([u8; DF_STACK_BYTES]);
static mut DF_STACK: Stack = Stack([0; DF_STACK_BYTES]);

static TSS: Once<TaskStateSegment> = Once::new();
static GDT: Once<(GlobalDescriptorTable, [SegmentSelector; 3])> = Once::new();

/// Load the GDT and TSS (once, at boot).
pub fn init() {
    let tss = TSS.call_once(|| {
        let mut t = TaskStateSegment::new();
        let base = VirtAddr::from_ptr(core::ptr::addr_of!(DF_STACK));
        t.interrupt_stack_table[DOUBLE_FAULT_IST as usize] = base + DF_STACK_BYTES as u64;
        t
    });
    let (gdt, [code, data, tss_sel]) = GDT.call_once(|| {
        let mut g = GlobalDescriptorTable::new();
        let code = g.append(Descriptor::kernel_code_segment());
        let data = g.append(Descriptor::kernel_data_segment());
        let tss_sel = g.append(Descriptor::tss_segment(tss));
        (g, [code, data, tss_sel])
    });
    gdt.load();
    // SAFETY: the selectors index descriptors of the GDT just loaded, which
    // lives in a `static` and so outlives every use.
    unsafe {
        CS::set_reg(*code);
        SS::set_reg(*data);
        DS::set_reg(*data);
        ES::set_reg(*data);
        load_tss(*tss_sel);
    }
}
