//! A counting global allocator, so the endpoint target can check its memory bound in bytes.
//!
//! Written by hand: the crates that count allocations (e.g. `stats_alloc`) count process-wide,
//! and the replay tests run targets on several threads at once. This one counts per thread;
//! the engine is single-threaded, so everything a target allocates is charged to its thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Bytes this thread has allocated and not freed (may go negative when a thread frees
    /// what another allocated; the targets only look at differences on one thread).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static INSTALLED: Cell<bool> = const { Cell::new(false) };
}

/// Install with `#[global_allocator] static A: CountingAlloc = CountingAlloc;` in the binary
/// (the fuzz targets and the replay tests do); [`heap_live_bytes`] then reports.
#[derive(Debug)]
pub struct CountingAlloc;

fn charge(delta: isize) {
    // `try_with`: during thread teardown the slot may be gone; then the count is not needed.
    let _ = LIVE.try_with(|l| l.set(l.get().wrapping_add(delta)));
    let _ = INSTALLED.try_with(|i| i.set(true));
}

// SAFETY: every call is forwarded unchanged to the system allocator; only counters change.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            charge(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            charge(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        charge(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            charge(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Bytes the current thread holds on the heap, or `None` when [`CountingAlloc`] is not the
/// global allocator (then the targets skip their memory checks).
pub fn heap_live_bytes() -> Option<isize> {
    if INSTALLED.try_with(|i| i.get()).unwrap_or(false) {
        LIVE.try_with(|l| l.get()).ok()
    } else {
        None
    }
}
