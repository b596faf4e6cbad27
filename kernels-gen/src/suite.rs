//! The correctness suite: every kernel's test cases as [`KernelCheck`]s, each a [`Program`]
//! plus a verification against a float64 reference (and the DSL primitives whose hardware
//! layout a kernel will rest on, against exact host results: `crate::mma_checks`). `cargo test`
//! runs the suite in the interpreter; `entkv gpu-check` runs the same checks on the GPU.

use crate::program::{Program, ProgramError};
use crate::KernelGenError;
use entkv_dsl::Kernel;
use std::rc::Rc;
use thiserror::Error;

/// Whether a run matched its reference, and the numbers behind the verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub passed: bool,
    pub detail: String,
}

impl Outcome {
    pub fn new(passed: bool, detail: impl Into<String>) -> Outcome {
        Outcome {
            passed,
            detail: detail.into(),
        }
    }
}

#[derive(Debug, Error)]
pub enum SuiteError {
    #[error(transparent)]
    Gen(#[from] KernelGenError),
    #[error(transparent)]
    Program(#[from] ProgramError),
    #[error("{0}")]
    Other(String),
}

/// One test case of one kernel (or of a pipeline of kernels).
pub trait KernelCheck {
    /// Unique, descriptive: kernel, specialization, shape, data.
    fn name(&self) -> String;
    /// The buffers and calls to run (outputs poisoned).
    fn program(&self) -> Result<Program, SuiteError>;
    /// Compare the program's buffers after the run with the reference.
    fn verify(&self, ran: &Program) -> Outcome;
}

/// Run one check in the interpreter.
pub fn run_interp(check: &dyn KernelCheck) -> Result<Outcome, SuiteError> {
    let mut p = check.program()?;
    p.run_interp()?;
    Ok(check.verify(&p))
}

/// Run `checks` in the interpreter, printing one line each (outcome, time, numbers); returns
/// the names of those that failed or could not run.
pub fn interp_failures(checks: impl IntoIterator<Item = Box<dyn KernelCheck>>) -> Vec<String> {
    let mut failed = Vec::new();
    for c in checks {
        let name = c.name();
        let start = std::time::Instant::now();
        match run_interp(c.as_ref()) {
            Ok(o) => {
                let verdict = if o.passed { "ok  " } else { "FAIL" };
                println!(
                    "{verdict} {name} ({:.1} s): {}",
                    start.elapsed().as_secs_f64(),
                    o.detail
                );
                if !o.passed {
                    failed.push(name);
                }
            }
            Err(e) => {
                println!("ERR  {name}: {e}");
                failed.push(name);
            }
        }
    }
    failed
}

/// The distinct kernels (by entry name) launched by the programs of checks `share`,
/// `share + shares`, … of [`all_checks`]: work dealt out to threads, each of which builds its
/// own share (kernels hold `Rc`s). The checks whose program cannot be built come back apart,
/// by name, with their error.
pub fn share_kernels(share: usize, shares: usize) -> (Vec<Rc<Kernel>>, Vec<(String, SuiteError)>) {
    let mut seen = std::collections::HashSet::new();
    let (mut kernels, mut errors) = (Vec::new(), Vec::new());
    for check in all_checks().iter().skip(share).step_by(shares.max(1)) {
        match check.program() {
            Ok(p) => kernels.extend(
                p.calls
                    .iter()
                    .filter(|c| seen.insert(c.kernel.name.clone()))
                    .map(|c| c.kernel.clone()),
            ),
            Err(e) => errors.push((check.name(), e)),
        }
    }
    (kernels, errors)
}

/// Every registered check.
pub fn all_checks() -> Vec<Box<dyn KernelCheck>> {
    let mut v: Vec<Box<dyn KernelCheck>> = Vec::new();
    v.extend(crate::page_meta::checks());
    v.extend(crate::gaussian::checks());
    v.extend(crate::decode_checks::checks());
    v.extend(crate::certified_checks::checks());
    v.extend(crate::topk::checks());
    v.extend(crate::prune_checks::checks());
    v.extend(crate::mma_checks::checks());
    v.extend(crate::guard::checks());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `entkv gpu-check` and the interpreter runs report checks by name, across the whole
    /// suite.
    #[test]
    fn every_registered_check_has_a_unique_name() {
        let names: Vec<String> = all_checks().iter().map(|c| c.name()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:#?}");
    }
}
