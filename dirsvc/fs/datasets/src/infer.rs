//! `infer`'s dataset: one weights file (`DIR/weights.bin`): a header
//! block, the shared layers, then the experts, each 4 KiB aligned.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;

use crate::data::{manifest, pattern_fill, DataFile, Dataset, Gen};
use crate::rng::hash2;

/// Routed experts.
pub const EXPERTS: u64 = 64;
/// Experts per token.
pub const TOP_K: u64 = 6;
/// Vocabulary (DeepSeek V2's).
pub const VOCAB: u64 = 102_400;
/// Activation vector length.
pub const DIM: usize = 256;
/// Bytes per mapped load.
pub const CHUNK: u64 = 64 << 10;
/// The weights file's name.
pub const WEIGHTS: &str = "weights.bin";
/// Alignment of the header, the shared layers and each expert.
pub const PAGE: u64 = 4096;

/// The weights file's geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Shared-layer bytes (a multiple of 4 KiB).
    pub shared: u64,
    /// Bytes per expert (a multiple of 4 KiB).
    pub expert: u64,
    /// Dataset seed.
    pub seed: u64,
}

impl Layout {
    /// Offset of the shared layers.
    pub fn shared_at(&self) -> u64 {
        PAGE
    }
    /// Offset of expert `e`.
    pub fn expert_at(&self, e: u64) -> u64 {
        PAGE + self.shared + e * self.expert
    }
    /// File size.
    pub fn size(&self) -> u64 {
        self.expert_at(EXPERTS)
    }
}

struct Weights(Layout);

impl Gen for Weights {
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        pattern_fill(hash2(self.0.seed, 0x77), offset, buf);
        if offset == 0 {
            let n = buf.len().min(PAGE as usize);
            buf[..n].fill(0);
            let head = b"ONECMOE1";
            let k = n.min(8);
            buf[..k].copy_from_slice(&head[..k]);
        }
    }
}

/// The dataset: one weights file of about `size` bytes.
pub fn plan(size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
    let shared = (size / 16 / PAGE).max(1) * PAGE;
    let expert = ((size - shared) / EXPERTS / PAGE).max(1) * PAGE;
    let l = Layout {
        shared,
        expert,
        seed,
    };
    let files = vec![
        DataFile {
            path: format!("{root}/manifest"),
            ..manifest(
                "infer",
                seed,
                &[
                    ("shared", shared),
                    ("experts", EXPERTS),
                    ("expert", expert),
                    ("topk", TOP_K),
                ],
            )
        },
        DataFile {
            path: format!("{root}/{WEIGHTS}"),
            size: l.size(),
            gen: Box::new(Weights(l)),
        },
    ];
    Ok(Dataset {
        app: "infer",
        root: String::from(root),
        dirs: vec![String::from(root)],
        files,
    })
}
