//! Device drivers: PCI configuration access, the ivshmem shared region,
//! virtio-blk (our own request queue on `virtio-drivers` types) and
//! its completion interrupt, and virtio-net (through `virtio-drivers`).

pub mod blkdev;
pub mod hal;
pub mod ivshmem;
pub mod net;
pub mod pci;
pub mod virtio;
pub mod virtio_irq;
