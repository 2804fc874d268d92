//! What one call of a script may use: a time budget (QuickJS asks an
//! interrupt handler every few thousand operations) and the memory it may
//! add (an allocator that counts QuickJS's bytes and refuses those past
//! the call's cap, so the call throws "out of memory" and nothing else
//! runs short).

use rquickjs::allocator::{Allocator, RustAllocator};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

/// The budgets of the call under way, shared by the runtime's allocator,
/// its interrupt handler and the worker that starts each call.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// Bytes QuickJS holds now.
    pub used: Cell<usize>,
    /// Allocations that would take `used` past this fail.
    pub cap: Cell<usize>,
    /// The call is interrupted once the clock passes this.
    pub deadline: Cell<Option<Instant>>,
    /// The call was interrupted or refused memory: its error says which.
    pub interrupted: Cell<bool>,
    pub refused: Cell<bool>,
}

impl Budget {
    pub fn new() -> Rc<Budget> {
        Rc::new(Budget {
            cap: Cell::new(usize::MAX),
            ..Budget::default()
        })
    }

    /// A call begins: it may run `time` and add `memory` bytes.
    pub fn begin(&self, time: std::time::Duration, memory: usize) {
        self.deadline.set(Some(Instant::now() + time));
        self.cap.set(self.used.get().saturating_add(memory));
        self.interrupted.set(false);
        self.refused.set(false);
    }

    /// The call ended: nothing bounds the engine until the next.
    pub fn end(&self) {
        self.deadline.set(None);
        self.cap.set(usize::MAX);
    }

    /// The interrupt handler's question: is the call past its time?
    pub fn out_of_time(&self) -> bool {
        let late = self.deadline.get().is_some_and(|d| Instant::now() >= d);
        if late {
            self.interrupted.set(true);
        }
        late
    }

    fn admits(&self, more: usize) -> bool {
        let ok = self.used.get().saturating_add(more) <= self.cap.get();
        if !ok {
            self.refused.set(true);
        }
        ok
    }
}

/// QuickJS's allocator: Rust's, with every byte counted against [`Budget`].
pub(crate) struct Counting(pub Rc<Budget>);

// SAFETY: every pointer comes from `RustAllocator` and goes back to it;
// the counting only reads the sizes it reports.
unsafe impl Allocator for Counting {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.0.admits(size) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.alloc(size);
        if !ptr.is_null() {
            // SAFETY: just allocated by RustAllocator.
            let got = unsafe { RustAllocator::usable_size(ptr) };
            self.0.used.set(self.0.used.get() + got);
        }
        ptr
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        if !self.0.admits(count.saturating_mul(size)) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.calloc(count, size);
        if !ptr.is_null() {
            // SAFETY: just allocated by RustAllocator.
            let got = unsafe { RustAllocator::usable_size(ptr) };
            self.0.used.set(self.0.used.get() + got);
        }
        ptr
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        if !ptr.is_null() {
            let had = RustAllocator::usable_size(ptr);
            self.0.used.set(self.0.used.get().saturating_sub(had));
        }
        RustAllocator.dealloc(ptr)
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        let had = if ptr.is_null() {
            0
        } else {
            RustAllocator::usable_size(ptr)
        };
        if new_size > had && !self.0.admits(new_size - had) {
            return std::ptr::null_mut();
        }
        let out = RustAllocator.realloc(ptr, new_size);
        if !out.is_null() || new_size == 0 {
            let got = if out.is_null() {
                0
            } else {
                RustAllocator::usable_size(out)
            };
            self.0.used.set(self.0.used.get() - had + got);
        }
        out
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        RustAllocator::usable_size(ptr)
    }
}
