//! Device drivers: PCI configuration access, the ivshmem shared region and
//! virtio-blk (through `virtio-drivers`).

pub mod ivshmem;
pub mod pci;
pub mod virtio;
