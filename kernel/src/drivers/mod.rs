//! Device drivers: PCI configuration access, the ivshmem shared region,
//! virtio-blk and virtio-net (through `virtio-drivers`).

pub mod ivshmem;
pub mod net;
pub mod pci;
pub mod virtio;
