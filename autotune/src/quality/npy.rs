//! A small `.npy` reader (and writer, for tests and for users who want to hand `entkv quality`
//! arrays from another tool): float arrays only, little-endian, C order.
//!
//! Supported: format versions 1.0, 2.0 and 3.0 (`numpy.save` writes 1.0 unless the header is
//! too long), dtypes `<f2`, `<f4`, `<f8` (also spelled `float16`/`float32`/`float64` by
//! numpy, which writes them as those `descr` strings), `fortran_order: False`. Everything else
//! is refused with an error that says what was found, never read as garbage. Written in-crate
//! because the format is a ten-line header and a raw buffer; no dependency is worth it.
//!
//! `entkv quality --q Q.npy --k K.npy --v V.npy` takes one decode step's activations of one
//! layer of one sequence: `q` `[heads, d]` (the newest token's queries), `K` and `V`
//! `[kv_heads, n, d]` (every cached token, oldest first, the newest last); see
//! [`load_qkv`].

use std::path::{Path, PathBuf};

use entkv_dsl::interp::values::f16_from_f64;
use half::f16;
use thiserror::Error;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A float dtype of an `.npy` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyDtype {
    /// `<f2`.
    F16,
    /// `<f4`.
    F32,
    /// `<f8`.
    F64,
}

impl NpyDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            NpyDtype::F16 => 2,
            NpyDtype::F32 => 4,
            NpyDtype::F64 => 8,
        }
    }

    /// The header's `descr`.
    pub fn descr(self) -> &'static str {
        match self {
            NpyDtype::F16 => "<f2",
            NpyDtype::F32 => "<f4",
            NpyDtype::F64 => "<f8",
        }
    }

    fn parse(descr: &str) -> Result<NpyDtype, NpyError> {
        match descr {
            "<f2" => Ok(NpyDtype::F16),
            "<f4" => Ok(NpyDtype::F32),
            "<f8" => Ok(NpyDtype::F64),
            d if d.starts_with('>') => Err(NpyError::Dtype(format!(
                "`{d}` is big-endian; save little-endian floats (`arr.astype('<f4')`)"
            ))),
            d => Err(NpyError::Dtype(format!(
                "`{d}` is not a little-endian float16/float32/float64 (`<f2`, `<f4`, `<f8`)"
            ))),
        }
    }
}

/// Why an `.npy` file could not be used.
#[derive(Debug, Error)]
pub enum NpyError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not an .npy file (no \\x93NUMPY magic)")]
    NotNpy,
    #[error("unsupported .npy format version {0}.{1} (1.0, 2.0 and 3.0 are read)")]
    Version(u8, u8),
    #[error("malformed .npy header: {0}")]
    Header(String),
    #[error("unsupported dtype {0}")]
    Dtype(String),
    #[error("array is in Fortran order; save a C-order array (`np.ascontiguousarray`)")]
    FortranOrder,
    #[error("truncated: the header promises {expected} data bytes (shape {shape:?}), the file has {got}")]
    Truncated {
        shape: Vec<usize>,
        expected: usize,
        got: usize,
    },
    #[error("{extra} bytes after the data of shape {shape:?}")]
    Trailing { shape: Vec<usize>, extra: usize },
    #[error("{what}: expected shape {expected}, got {got:?}")]
    Shape {
        what: String,
        expected: String,
        got: Vec<usize>,
    },
    #[error("{path}: {source}")]
    In {
        path: PathBuf,
        #[source]
        source: Box<NpyError>,
    },
}

/// An array read from an `.npy` file, widened to f64 (exactly: every f16/f32 is an f64).
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub shape: Vec<usize>,
    /// The file's dtype.
    pub dtype: NpyDtype,
    /// Elements in C order.
    pub data: Vec<f64>,
}

/// Read and decode `path`; errors name the file.
pub fn read_npy(path: &Path) -> Result<NpyArray, NpyError> {
    let bytes = std::fs::read(path).map_err(|source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_npy(&bytes).map_err(|e| NpyError::In {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

/// Decode the bytes of an `.npy` file.
pub fn parse_npy(bytes: &[u8]) -> Result<NpyArray, NpyError> {
    if bytes.len() < 8 || &bytes[..6] != MAGIC {
        return Err(NpyError::NotNpy);
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len_bytes, start) = match major {
        1 => (2, 10),
        2 | 3 => (4, 12),
        _ => return Err(NpyError::Version(major, minor)),
    };
    if bytes.len() < start {
        return Err(NpyError::Header("file ends inside the header length".into()));
    }
    let header_len = if len_bytes == 2 {
        u16::from_le_bytes([bytes[8], bytes[9]]) as usize
    } else {
        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            NpyError::Header(format!(
                "header of {header_len} bytes runs past the end of the file"
            ))
        })?;
    let header =
        std::str::from_utf8(&bytes[start..end]).map_err(|_| NpyError::Header("header is not text".into()))?;
    let h = parse_header(header)?;
    let dtype = NpyDtype::parse(&h.descr)?;
    if h.fortran_order {
        return Err(NpyError::FortranOrder);
    }
    let elems = h
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| NpyError::Header(format!("shape {:?} overflows", h.shape)))?;
    let expected = elems
        .checked_mul(dtype.size())
        .ok_or_else(|| NpyError::Header(format!("shape {:?} overflows", h.shape)))?;
    let body = &bytes[end..];
    if body.len() < expected {
        return Err(NpyError::Truncated {
            shape: h.shape,
            expected,
            got: body.len(),
        });
    }
    if body.len() > expected {
        return Err(NpyError::Trailing {
            shape: h.shape,
            extra: body.len() - expected,
        });
    }
    let data = match dtype {
        NpyDtype::F16 => body
            .chunks_exact(2)
            .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64())
            .collect(),
        NpyDtype::F32 => body
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        NpyDtype::F64 => body
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8-byte chunk")))
            .collect(),
    };
    Ok(NpyArray {
        shape: h.shape,
        dtype,
        data,
    })
}

struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// Parse the header, a Python dict literal such as
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` (padded with spaces, ending
/// in a newline). Only the three keys numpy writes are accepted, each exactly once.
fn parse_header(text: &str) -> Result<Header, NpyError> {
    let bad = |why: &str| NpyError::Header(format!("{why} in `{}`", text.trim_end()));
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| bad("not a dict"))?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let (key, after) = quoted(rest).ok_or_else(|| bad("expected a quoted key"))?;
        let after = after
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| bad("expected `:`"))?
            .trim_start();
        let after = match key {
            "descr" => {
                let (v, a) = quoted(after).ok_or_else(|| bad("`descr` is not a string"))?;
                if descr.replace(v.to_string()).is_some() {
                    return Err(bad("`descr` twice"));
                }
                a
            }
            "fortran_order" => {
                let (v, a) = if let Some(a) = after.strip_prefix("False") {
                    (false, a)
                } else if let Some(a) = after.strip_prefix("True") {
                    (true, a)
                } else {
                    return Err(bad("`fortran_order` is not True/False"));
                };
                if fortran.replace(v).is_some() {
                    return Err(bad("`fortran_order` twice"));
                }
                a
            }
            "shape" => {
                let a = after
                    .strip_prefix('(')
                    .ok_or_else(|| bad("`shape` is not a tuple"))?;
                let close = a.find(')').ok_or_else(|| bad("`shape` is not closed"))?;
                let dims = a[..close]
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| s.trim_end_matches('L').parse::<usize>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| bad("`shape` holds a non-integer"))?;
                if shape.replace(dims).is_some() {
                    return Err(bad("`shape` twice"));
                }
                &a[close + 1..]
            }
            other => return Err(bad(&format!("unexpected key `{other}`"))),
        };
        let after = after.trim_start();
        rest = match after.strip_prefix(',') {
            Some(a) => a.trim_start(),
            None if after.is_empty() => after,
            None => return Err(bad("expected `,`")),
        };
    }
    Ok(Header {
        descr: descr.ok_or_else(|| bad("no `descr`"))?,
        fortran_order: fortran.ok_or_else(|| bad("no `fortran_order`"))?,
        shape: shape.ok_or_else(|| bad("no `shape`"))?,
    })
}

/// A `'…'` or `"…"` string at the start of `s` (no escapes: numpy's keys and dtypes have none)
/// and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &s[1..];
    let end = body.find(q)?;
    Some((&body[..end], &body[end + 1..]))
}

/// The bytes of an `.npy` file (format `version` 1 or 2) holding `data` (C order, `shape`)
/// rounded to `dtype`, as `numpy.save` lays it out: the header padded with spaces to a multiple
/// of 64 bytes, ending in a newline.
pub fn encode_npy(dtype: NpyDtype, shape: &[usize], data: &[f64], version: u8) -> Vec<u8> {
    assert_eq!(
        shape.iter().product::<usize>(),
        data.len(),
        "data matches the shape"
    );
    assert!(version == 1 || version == 2, "format version 1 or 2");
    let dims = match shape {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {dims}, }}",
        dtype.descr()
    );
    let prefix = if version == 1 { 10 } else { 12 };
    let total = (prefix + header.len() + 1).div_ceil(64) * 64;
    while prefix + header.len() + 1 < total {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(total + data.len() * dtype.size());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    for &x in data {
        match dtype {
            NpyDtype::F16 => out.extend_from_slice(&f16_from_f64(x).to_le_bytes()),
            NpyDtype::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            NpyDtype::F64 => out.extend_from_slice(&x.to_le_bytes()),
        }
    }
    out
}

/// Write `data` (C order, `shape`) to `path` as a version 1.0 `.npy` of `dtype`.
pub fn write_npy(path: &Path, dtype: NpyDtype, shape: &[usize], data: &[f64]) -> Result<(), NpyError> {
    std::fs::write(path, encode_npy(dtype, shape, data, 1)).map_err(|source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// One decode step's activations of one layer of one sequence, as `entkv quality` takes them.
#[derive(Clone, Debug)]
pub struct QkvArrays {
    /// Query heads.
    pub heads: usize,
    pub kv_heads: usize,
    /// Cached tokens (the newest last; its query is `q`).
    pub n: usize,
    pub head_dim: usize,
    /// `[heads, d]`.
    pub q: Vec<f64>,
    /// `[kv_heads, n, d]`.
    pub k: Vec<f64>,
    /// `[kv_heads, n, d]`.
    pub v: Vec<f64>,
}

/// Read q `[heads, d]`, K and V `[kv_heads, n, d]` (same shape) and check that the shapes fit
/// together: one head dim, `heads` a multiple of `kv_heads`, `n ≥ 1`. Whether the head dim and
/// the GQA group are supported is the kernels' call (checked when the problem is made).
pub fn load_qkv(q: &Path, k: &Path, v: &Path) -> Result<QkvArrays, NpyError> {
    let (qa, ka, va) = (read_npy(q)?, read_npy(k)?, read_npy(v)?);
    let shape_err = |path: &Path, expected: String, got: &[usize]| NpyError::Shape {
        what: format!("{}", path.display()),
        expected,
        got: got.to_vec(),
    };
    let [heads, d] = qa.shape[..] else {
        return Err(shape_err(q, "[heads, d] (2-D) for the queries".into(), &qa.shape));
    };
    let [kv_heads, n, kd] = ka.shape[..] else {
        return Err(shape_err(
            k,
            "[kv_heads, n, d] (3-D) for the keys".into(),
            &ka.shape,
        ));
    };
    if kd != d || kv_heads == 0 || n == 0 || heads == 0 || heads % kv_heads != 0 {
        return Err(shape_err(
            k,
            format!("[kv_heads, n ≥ 1, {d}] with kv_heads ≥ 1 dividing the {heads} query heads"),
            &ka.shape,
        ));
    }
    if va.shape != ka.shape {
        return Err(shape_err(
            v,
            format!("{:?} (the keys' shape)", ka.shape),
            &va.shape,
        ));
    }
    Ok(QkvArrays {
        heads,
        kv_heads,
        n,
        head_dim: d,
        q: qa.data,
        k: ka.data,
        v: va.data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_variants_parse() {
        let h = parse_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }  \n").unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape),
            ("<f4", false, vec![2, 3])
        );
        let h = parse_header("{\"shape\": (5,), \"fortran_order\": True, \"descr\": \"<f8\"}").unwrap();
        assert_eq!((h.fortran_order, h.shape), (true, vec![5]));
        let h = parse_header("{'descr': '<f2', 'fortran_order': False, 'shape': ()}").unwrap();
        assert!(h.shape.is_empty());
        for bad in [
            "{'descr': '<f4', 'shape': (2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
            "'descr': '<f4'",
        ] {
            assert!(matches!(parse_header(bad), Err(NpyError::Header(_))), "{bad}");
        }
    }

    #[test]
    fn round_trip_every_dtype_and_version() {
        let data: Vec<f64> = (0..24).map(|i| i as f64 * 0.5 - 3.0).collect();
        for dtype in [NpyDtype::F16, NpyDtype::F32, NpyDtype::F64] {
            for version in [1, 2] {
                let bytes = encode_npy(dtype, &[2, 3, 4], &data, version);
                let header_end = if version == 1 { 10 } else { 12 }
                    + if version == 1 {
                        u16::from_le_bytes([bytes[8], bytes[9]]) as usize
                    } else {
                        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
                    };
                assert_eq!(header_end % 64, 0, "numpy's alignment");
                let a = parse_npy(&bytes).unwrap();
                assert_eq!((a.shape.clone(), a.dtype), (vec![2, 3, 4], dtype));
                assert_eq!(
                    a.data, data,
                    "{dtype:?} v{version}: halves are exact in every dtype"
                );
            }
        }
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let good = encode_npy(NpyDtype::F32, &[4], &[1.0, 2.0, 3.0, 4.0], 1);
        assert!(matches!(parse_npy(b"PK\x03\x04 zip"), Err(NpyError::NotNpy)));
        let mut v = good.clone();
        v[6] = 4;
        assert!(matches!(parse_npy(&v), Err(NpyError::Version(4, 0))));
        let short = &good[..good.len() - 3];
        let e = parse_npy(short).unwrap_err();
        assert!(
            matches!(
                e,
                NpyError::Truncated {
                    expected: 16,
                    got: 13,
                    ..
                }
            ),
            "{e}"
        );
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            parse_npy(&long),
            Err(NpyError::Trailing { extra: 1, .. })
        ));
        // Same-length edits of the header keep its length field valid.
        let swap = |from: &str, to: &str| {
            assert_eq!(from.len(), to.len());
            let mut b = good.clone();
            let at = b
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .expect("pattern in the header");
            b[at..at + to.len()].copy_from_slice(to.as_bytes());
            parse_npy(&b)
        };
        assert!(matches!(swap("'<f4'", "'>f4'"), Err(NpyError::Dtype(m)) if m.contains("big-endian")));
        assert!(matches!(swap("'<f4'", "'<i4'"), Err(NpyError::Dtype(_))));
        assert!(matches!(swap("False", "True "), Err(NpyError::FortranOrder)));
    }
}
