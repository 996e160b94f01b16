//! nsys serialises process and thread identities into one 64-bit integer:
//! `globalTid = (hardware/VM id bits) | pid << 24 | tid`, and `globalPid` is the same value
//! with the thread bits cleared. The masks below are the ones `nsys stats` reports use.

/// `globalTid & PID_MASK == globalPid`.
pub const GLOBAL_PID_MASK: u64 = 0xFFFF_FFFF_FF00_0000;

/// The `globalPid` a `globalTid` belongs to.
pub fn global_pid(global_tid: i64) -> i64 {
    ((global_tid as u64) & GLOBAL_PID_MASK) as i64
}

/// The operating-system process id inside a `globalPid` / `globalTid`.
pub fn pid(global_id: i64) -> i64 {
    (((global_id as u64) >> 24) & 0x00FF_FFFF) as i64
}

/// The operating-system thread id inside a `globalTid`.
pub fn tid(global_tid: i64) -> i64 {
    ((global_tid as u64) & 0x00FF_FFFF) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_serialised_thread_id() {
        let gtid: i64 = (1 << 48) | (4242 << 24) | 4250;
        assert_eq!(pid(gtid), 4242);
        assert_eq!(tid(gtid), 4250);
        assert_eq!(global_pid(gtid), (1 << 48) | (4242 << 24));
        assert_eq!(pid(global_pid(gtid)), 4242);
    }
}
