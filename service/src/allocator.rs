//! The three processes (ingest, the API, the projector) use mimalloc
//! as their global allocator; how soon it hands freed memory back to the
//! OS is each one's trade between resident memory and page faults.

/// Has mimalloc hand freed memory back to the OS `delay_ms` after it was
/// freed (mimalloc 3's `mi_option_purge_delay`; another major version
/// keeps its default). Purging happens as memory is allocated and freed:
/// a process that goes quiet keeps what it held last.
pub fn purge_freed_memory_after(delay_ms: std::ffi::c_long) {
    // The 16th entry of mimalloc 3's option enum; libmimalloc-sys names no
    // constant for it.
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: plain calls into the allocator's option table, which it
    // reads on every purge.
    unsafe {
        if libmimalloc_sys::mi_version() / 10_000 == 3 {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, delay_ms);
        }
    }
}
