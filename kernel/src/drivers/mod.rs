//! Device drivers: the glue between the `virtio-drivers` crate and the kernel.
//!
//! [`virtio`] finds virtio-mmio devices in the device tree, hands each to at most one
//! driver, and implements the crate's `Hal` with the kernel's frame allocator.
//! [`virtio_console`] drives a virtio console port as a byte channel to the host (used by
//! [`crate::hotload`]).
//!
//! Limitations: devices are polled; the PLIC is not used yet.

#[allow(unsafe_code)]
pub mod virtio;
pub mod virtio_console;
