//! A kernel test written once, run anywhere: named host buffers and a sequence of kernel calls
//! that read and write them. The CPU interpreter runs a [`Program`] in CI
//! ([`Program::run_interp`]); the GPU harness (`entkv-autotune`) uploads the same buffers,
//! launches the same calls through the runtime, and downloads the buffers back, so every kernel
//! is checked against the same float64 reference on both.

use entkv_abi::LaunchGeometry;
use entkv_dsl::interp::{
    run_with, Arg, HostBuffer, InterpError, InterpOptions, LaunchDims, RunStats, ScalarValue,
};
use entkv_dsl::ir::ParamKind;
use entkv_dsl::{Kernel, Scalar};
use std::collections::BTreeMap;
use std::rc::Rc;
use thiserror::Error;

pub use entkv_abi::ArgRef;

/// One kernel launch.
#[derive(Clone, Debug)]
pub struct Call {
    pub kernel: Rc<Kernel>,
    pub geometry: LaunchGeometry,
    pub args: Vec<ArgRef>,
}

#[derive(Debug, Error)]
pub enum ProgramError {
    #[error("call {call} ({kernel}): {message}")]
    BadCall {
        call: usize,
        kernel: String,
        message: String,
    },
    #[error("call {call} ({kernel}): {source}")]
    Interp {
        call: usize,
        kernel: String,
        #[source]
        source: InterpError,
    },
}

/// What [`Program::poisoned`] fills an integer buffer with.
pub const POISON_INT: f64 = -7.0;

/// Named buffers and the calls that use them, in order.
#[derive(Clone, Debug, Default)]
pub struct Program {
    pub buffers: BTreeMap<String, HostBuffer>,
    pub calls: Vec<Call>,
}

impl Program {
    pub fn new() -> Program {
        Program::default()
    }

    /// Add (or replace) a buffer.
    pub fn buffer(&mut self, name: &str, data: HostBuffer) -> &mut Self {
        self.buffers.insert(name.to_string(), data);
        self
    }

    /// A buffer filled with NaN (floats) or [`POISON_INT`] (integers): kernels must overwrite
    /// what they produce, and anything they leave shows.
    pub fn poisoned(&mut self, name: &str, elem: Scalar, len: usize) -> &mut Self {
        let v = if matches!(elem, Scalar::F16 | Scalar::BF16 | Scalar::F32) {
            f64::NAN
        } else {
            POISON_INT
        };
        self.buffer(name, HostBuffer::filled_f64(elem, len, v))
    }

    pub fn call(&mut self, kernel: Rc<Kernel>, geometry: LaunchGeometry, args: Vec<ArgRef>) -> &mut Self {
        self.calls.push(Call {
            kernel,
            geometry,
            args,
        });
        self
    }

    pub fn get(&self, name: &str) -> &HostBuffer {
        self.buffers
            .get(name)
            .unwrap_or_else(|| panic!("program has no buffer `{name}`"))
    }

    /// Check every call's arguments against its kernel's parameters (names are not checked,
    /// kinds and element types are).
    pub fn check(&self) -> Result<(), ProgramError> {
        for (i, c) in self.calls.iter().enumerate() {
            let bad = |message: String| ProgramError::BadCall {
                call: i,
                kernel: c.kernel.name.clone(),
                message,
            };
            if c.args.len() != c.kernel.params.len() {
                return Err(bad(format!(
                    "{} arguments for {} parameters",
                    c.args.len(),
                    c.kernel.params.len()
                )));
            }
            for (a, p) in c.args.iter().zip(&c.kernel.params) {
                let ok = match (a, &p.kind) {
                    (ArgRef::Buf(name), ParamKind::Buffer { elem, .. }) => match self.buffers.get(name) {
                        Some(b) if b.elem() == *elem => true,
                        Some(b) => {
                            return Err(bad(format!(
                                "buffer `{name}` is {} but parameter `{}` wants {elem}",
                                b.elem(),
                                p.name
                            )))
                        }
                        None => return Err(bad(format!("no buffer `{name}` for parameter `{}`", p.name))),
                    },
                    (ArgRef::I32(_), ParamKind::Scalar(Scalar::I32))
                    | (ArgRef::U32(_), ParamKind::Scalar(Scalar::U32))
                    | (ArgRef::I64(_), ParamKind::Scalar(Scalar::I64))
                    | (ArgRef::F32(_), ParamKind::Scalar(Scalar::F32)) => true,
                    _ => false,
                };
                if !ok {
                    return Err(bad(format!("argument {a:?} does not fit parameter `{}`", p.name)));
                }
            }
        }
        Ok(())
    }

    /// Run every call in the interpreter (with its sanitizer); buffers are updated in place.
    pub fn run_interp(&mut self) -> Result<Vec<RunStats>, ProgramError> {
        self.check()?;
        let opts = InterpOptions::default();
        let mut stats = Vec::new();
        for (i, c) in self.calls.iter().enumerate() {
            // Each buffer is bound at most once per call (kernel buffers never alias).
            let mut taken: BTreeMap<&str, HostBuffer> = BTreeMap::new();
            for a in &c.args {
                if let ArgRef::Buf(name) = a {
                    if taken.contains_key(name.as_str()) {
                        return Err(ProgramError::BadCall {
                            call: i,
                            kernel: c.kernel.name.clone(),
                            message: format!("buffer `{name}` bound twice (kernel buffers must not alias)"),
                        });
                    }
                    let b = self.buffers.remove(name).expect("checked");
                    taken.insert(name.as_str(), b);
                }
            }
            let mut owned: Vec<(String, HostBuffer)> =
                taken.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let result = {
                let mut slots: BTreeMap<&str, &mut HostBuffer> =
                    owned.iter_mut().map(|(k, v)| (k.as_str(), v)).collect();
                let mut args: Vec<Arg> = Vec::with_capacity(c.args.len());
                for a in &c.args {
                    args.push(match a {
                        ArgRef::Buf(name) => Arg::Buf(slots.remove(name.as_str()).expect("bound once")),
                        ArgRef::I32(v) => Arg::Scalar(ScalarValue::I32(*v)),
                        ArgRef::U32(v) => Arg::Scalar(ScalarValue::U32(*v)),
                        ArgRef::I64(v) => Arg::Scalar(ScalarValue::I64(*v)),
                        ArgRef::F32(v) => Arg::Scalar(ScalarValue::F32(*v)),
                    });
                }
                let g = c.geometry;
                run_with(&c.kernel, LaunchDims::new(g.grid, g.block), &mut args, &opts)
            };
            for (k, v) in owned {
                self.buffers.insert(k, v);
            }
            stats.push(result.map_err(|source| ProgramError::Interp {
                call: i,
                kernel: c.kernel.name.clone(),
                source,
            })?);
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_dsl::{Access, KernelBuilder};

    fn scale_kernel() -> Rc<Kernel> {
        let mut k = KernelBuilder::new("scale", 32);
        let x = k.buffer("x", Scalar::F32, Access::Read);
        let y = k.buffer("y", Scalar::F32, Access::Write);
        let n = k.scalar_param("n", Scalar::I32);
        let s = k.scalar_param("s", Scalar::F32);
        let i = k.let_("i", k.global_thread_id().i32());
        k.if_(i.lt(n), |k| k.store(y, i, x.at(i) * s.clone()));
        Rc::new(k.finish().unwrap())
    }

    #[test]
    fn runs_calls_in_order_and_checks_arguments() {
        let k = scale_kernel();
        let mut p = Program::new();
        p.buffer("a", HostBuffer::F32(vec![1.0, 2.0, 3.0]));
        p.poisoned("b", Scalar::F32, 3);
        p.poisoned("c", Scalar::F32, 3);
        let g = LaunchGeometry::linear(1, 32);
        let args =
            |x: &str, y: &str, s: f32| vec![ArgRef::buf(x), ArgRef::buf(y), ArgRef::I32(3), ArgRef::F32(s)];
        p.call(k.clone(), g, args("a", "b", 2.0));
        p.call(k.clone(), g, args("b", "c", 10.0));
        p.run_interp().unwrap();
        assert_eq!(p.get("c").as_f32().unwrap(), &[20.0, 40.0, 60.0]);

        let mut bad = p.clone();
        bad.calls[0].args[1] = ArgRef::buf("missing");
        assert!(bad
            .run_interp()
            .unwrap_err()
            .to_string()
            .contains("no buffer `missing`"));
        let mut bad = p.clone();
        bad.calls[0].args[2] = ArgRef::F32(3.0);
        assert!(bad.check().is_err());
        let mut bad = p.clone();
        bad.calls[0].args[1] = ArgRef::buf("a");
        assert!(bad.run_interp().unwrap_err().to_string().contains("bound twice"));
    }
}
