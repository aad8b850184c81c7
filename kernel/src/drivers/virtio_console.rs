//! A virtio console port as a byte channel to the host.
//!
//! `cargo xtask qemu` gives every machine a `virtconsole` on the virtio-mmio bus whose
//! character device is a Unix socket on the host; port 0 (the console port) works without
//! the multiport feature. [`HostChannel`] claims that device and moves bytes: reads take
//! what the host has already sent (never wait), writes wait only until the device has
//! consumed the buffer (QEMU does that during the notifying register write; with nobody
//! connected on the host, QEMU drops the bytes).
//!
//! Limitations: polled (no interrupts); the driver receives into one page at a time, so a
//! poll returns at most 4 KiB.

use virtio_drivers::device::console::VirtIOConsole;
use virtio_drivers::transport::DeviceType;
use virtio_drivers::transport::mmio::MmioTransport;

use super::virtio::{KernelHal, Slot, VirtioError, claim};

/// A claimed virtio console, polled by its one owner.
pub struct HostChannel {
    device: VirtIOConsole<KernelHal, MmioTransport<'static>>,
    slot: Slot,
}

impl HostChannel {
    /// Claims the first unclaimed virtio console and initialises it.
    ///
    /// Errors: [`VirtioError::NoDevice`] if the machine has no (free) virtio console,
    /// [`VirtioError::Transport`] / [`VirtioError::Device`] if it does not initialise.
    pub fn open() -> Result<HostChannel, VirtioError> {
        let (slot, transport) = claim(DeviceType::Console)?;
        let device = VirtIOConsole::new(transport).map_err(VirtioError::Device)?;
        Ok(HostChannel { device, slot })
    }

    /// The virtio-mmio slot the console sits in.
    pub fn slot(&self) -> Slot {
        self.slot
    }

    /// Copies bytes the host has already sent into `buffer` without waiting; returns how
    /// many (0 when nothing is pending).
    ///
    /// Errors: the driver's, if the device misbehaves (e.g. returns a bad descriptor).
    pub fn receive(&mut self, buffer: &mut [u8]) -> Result<usize, virtio_drivers::Error> {
        let mut count = 0;
        while count < buffer.len() {
            match self.device.recv(true)? {
                Some(byte) => {
                    buffer[count] = byte;
                    count += 1;
                }
                None => break,
            }
        }
        Ok(count)
    }

    /// Sends `bytes` to the host.
    ///
    /// Errors: the driver's, if the device refuses the buffer.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), virtio_drivers::Error> {
        if bytes.is_empty() {
            return Ok(()); // a zero-length descriptor is not allowed
        }
        self.device.send_bytes(bytes)
    }
}
