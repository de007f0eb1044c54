//! Byte shuffling (as Blosc does it): the bytes of a buffer of 64-bit words regrouped so
//! that every word's byte 0 comes first, then every word's byte 1, and so on.
//!
//! ```text
//! words:     a0 a1 … a7 | b0 b1 … b7 | c0 …          (a, b, c: 8-byte words, LSB first)
//! shuffled:  a0 b0 c0 … | a1 b1 c1 … | … | a7 b7 c7 …
//! ```
//!
//! Arrays of doubles or pointers, and their XOR with an earlier version, hold alike bytes
//! at alike places of their words: the sign and exponent bytes of doubles of one
//! magnitude, the zero high bytes of a pointer or of a small change. Shuffled, these
//! become long runs that zstd codes in almost nothing, instead of noise it cannot match.

/// Bytes in a word.
const WORD: usize = 8;

/// Writes `words` shuffled into `streams` (the same length, a multiple of 8 bytes).
pub(crate) fn shuffle(words: &[u8], streams: &mut [u8]) {
    let n = word_count(words, streams);
    let whole = n - n % WORD;
    // Eight words at a time, as an 8×8 byte matrix turned into eight 8-byte runs.
    for first in (0..whole).step_by(WORD) {
        let mut rows: [u64; WORD] = std::array::from_fn(|i| load(words, (first + i) * WORD));
        transpose(&mut rows);
        for (b, row) in rows.iter().enumerate() {
            store(streams, b * n + first, *row);
        }
    }
    for i in whole..n {
        for b in 0..WORD {
            streams[b * n + i] = words[i * WORD + b];
        }
    }
}

/// Undoes [`shuffle`]: writes the words whose shuffled bytes are `streams` into `words`.
pub(crate) fn unshuffle(streams: &[u8], words: &mut [u8]) {
    let n = word_count(words, streams);
    let whole = n - n % WORD;
    for first in (0..whole).step_by(WORD) {
        let mut rows: [u64; WORD] = std::array::from_fn(|b| load(streams, b * n + first));
        transpose(&mut rows);
        for (i, row) in rows.iter().enumerate() {
            store(words, (first + i) * WORD, *row);
        }
    }
    for i in whole..n {
        for b in 0..WORD {
            words[i * WORD + b] = streams[b * n + i];
        }
    }
}

/// Words in `a`, which is as long as `b`.
fn word_count(a: &[u8], b: &[u8]) -> usize {
    assert!(
        a.len() == b.len() && a.len().is_multiple_of(WORD),
        "shuffling needs whole words of equal buffers"
    );
    a.len() / WORD
}

fn load(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; WORD];
    word.copy_from_slice(&bytes[at..at + WORD]);
    u64::from_le_bytes(word)
}

fn store(bytes: &mut [u8], at: usize, word: u64) {
    bytes[at..at + WORD].copy_from_slice(&word.to_le_bytes());
}

/// Transposes the 8×8 byte matrix whose row `i` is `rows[i]` (byte `j` of row `i`, LSB
/// first, is element `(i, j)`): swaps the off-diagonal 4×4 blocks, then 2×2 blocks within
/// them, then single bytes.
fn transpose(rows: &mut [u64; WORD]) {
    for (half, mask) in
        [(32, 0x0000_0000_ffff_ffff_u64), (16, 0x0000_ffff_0000_ffff), (8, 0x00ff_00ff_00ff_00ff)]
    {
        let step = half / 8;
        for i in (0..WORD).filter(|i| i & step == 0) {
            let t = ((rows[i] >> half) ^ rows[i + step]) & mask;
            rows[i] ^= t << half;
            rows[i + step] ^= t;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte by byte, as the module doc draws it.
    fn naive(words: &[u8]) -> Vec<u8> {
        let n = words.len() / WORD;
        let mut out = vec![0; words.len()];
        for i in 0..n {
            for b in 0..WORD {
                out[b * n + i] = words[i * WORD + b];
            }
        }
        out
    }

    #[test]
    fn matches_the_definition_and_undoes() {
        // Lengths with and without a tail of fewer than 8 words.
        for words in [0, 1, 7, 8, 9, 64, 517, 4096] {
            let src: Vec<u8> = (0..words * WORD).map(|i| (i * 131 % 251) as u8).collect();
            let mut shuffled = vec![0; src.len()];
            shuffle(&src, &mut shuffled);
            assert_eq!(shuffled, naive(&src), "{words} words");
            let mut back = vec![0; src.len()];
            unshuffle(&shuffled, &mut back);
            assert_eq!(back, src, "{words} words");
        }
    }

    #[test]
    fn groups_alike_bytes() {
        let doubles: Vec<u8> = (0..512).flat_map(|i| (1.0 + f64::from(i) * 1e-6).to_le_bytes()).collect();
        let mut shuffled = vec![0; doubles.len()];
        shuffle(&doubles, &mut shuffled);
        // The top byte of every double (sign and exponent): one run.
        assert!(shuffled[7 * 512..].iter().all(|&b| b == 0x3f));
    }
}
