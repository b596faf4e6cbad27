//! Fixed layouts of the two device regions a decoder needs besides the caller's tensors: the
//! workspace (scratch, selections and the per-head τ / support / kept outputs) and the page
//! metadata (bounds, moments, sketch). Each named buffer gets a 256-byte aligned offset, sized
//! for the largest step the decoder accepts, so one allocation serves every step.

use entkv_abi::{BufferSpec, Elem};

use super::EngineError;

/// Alignment of every buffer in a region (bytes): covers every vector width the kernels use.
pub const REGION_ALIGN: u64 = 256;

/// One named buffer inside a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Canonical buffer name (`entkv_abi::pipeline`).
    pub name: String,
    /// Element type.
    pub elem: Elem,
    /// Capacity in elements.
    pub len: u64,
    /// Byte offset from the region's base.
    pub offset: u64,
}

impl Slot {
    /// Capacity in bytes.
    pub fn bytes(&self) -> u64 {
        self.len * self.elem.size_bytes() as u64
    }
}

/// Named buffers at fixed offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionLayout {
    slots: Vec<Slot>,
    size: u64,
}

impl RegionLayout {
    /// Lay out `buffers` in order of first appearance; a name seen again keeps the largest
    /// length (it must have the same element type).
    pub fn new<'a>(buffers: impl IntoIterator<Item = &'a BufferSpec>) -> Result<RegionLayout, EngineError> {
        let mut merged: Vec<(String, Elem, u64)> = Vec::new();
        for b in buffers {
            match merged.iter_mut().find(|(n, _, _)| *n == b.name) {
                Some((_, elem, len)) => {
                    if *elem != b.elem {
                        return Err(EngineError::Internal(format!(
                            "buffer `{}` planned as {:?} and as {:?}",
                            b.name, elem, b.elem
                        )));
                    }
                    *len = (*len).max(b.len);
                }
                None => merged.push((b.name.clone(), b.elem, b.len)),
            }
        }
        let mut size = 0u64;
        let slots = merged
            .into_iter()
            .map(|(name, elem, len)| {
                let offset = size.div_ceil(REGION_ALIGN) * REGION_ALIGN;
                size = offset + (len * elem.size_bytes() as u64).max(1);
                Slot {
                    name,
                    elem,
                    len,
                    offset,
                }
            })
            .collect();
        Ok(RegionLayout {
            slots,
            size: size.div_ceil(REGION_ALIGN) * REGION_ALIGN,
        })
    }

    /// Bytes the region needs.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Every slot, in offset order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The slot of buffer `name`.
    pub fn get(&self, name: &str) -> Option<&Slot> {
        self.slots.iter().find(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(name: &str, elem: Elem, len: u64) -> BufferSpec {
        BufferSpec {
            name: name.into(),
            elem,
            len,
        }
    }

    #[test]
    fn slots_are_aligned_disjoint_and_keep_the_largest_length() {
        let bufs = [
            b("a", Elem::F32, 3),
            b("b", Elem::I32, 1000),
            b("a", Elem::F32, 70),
            b("c", Elem::F16, 0),
        ];
        let l = RegionLayout::new(&bufs).unwrap();
        assert_eq!(l.slots().len(), 3);
        assert_eq!(l.get("a").unwrap().len, 70);
        let mut end = 0;
        for s in l.slots() {
            assert_eq!(s.offset % REGION_ALIGN, 0);
            assert!(s.offset >= end, "{s:?} overlaps");
            end = s.offset + s.bytes();
        }
        assert!(l.size() >= end && l.size() % REGION_ALIGN == 0);
        let e = RegionLayout::new(&[b("a", Elem::F32, 1), b("a", Elem::I32, 1)]).unwrap_err();
        assert!(e.to_string().contains("`a`"), "{e}");
    }
}
