//! FNV-1a, the one content hash of the crate: stable across versions and platforms (written
//! into markers, journals and manifests that a later version must read), cheap, and not for
//! anything adversarial.

/// 64-bit FNV-1a over `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// 32-bit FNV-1a, fed in pieces (the markers hash a region line by line).
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a32(u32);

impl Default for Fnv1a32 {
    fn default() -> Self {
        Fnv1a32(0x811c_9dc5)
    }
}

impl Fnv1a32 {
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u32).wrapping_mul(0x0100_0193);
        }
    }

    pub fn finish(self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_test_vectors() {
        // From the FNV reference test suite.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        let mut h = Fnv1a32::default();
        h.write(b"foobar");
        assert_eq!(h.finish(), 0xbf9c_f968);
        let mut split = Fnv1a32::default();
        split.write(b"foo");
        split.write(b"bar");
        assert_eq!(
            split.finish(),
            0xbf9c_f968,
            "streaming is the same as whole"
        );
    }
}
