#![forbid(unsafe_code)]

fn main() {
    std::process::exit(onecopy_ivshmem_server::main_with_args(
        std::env::args().skip(1),
    ));
}
