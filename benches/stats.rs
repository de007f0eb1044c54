//! Summaries of repeated measurements, shared by the benchmarks.

// Each benchmark uses some of these.
#![allow(dead_code)]

pub fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

pub fn median(values: &[f64]) -> f64 {
    let v = sorted(values.to_vec());
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

pub fn p90(values: &[f64]) -> f64 {
    let v = sorted(values.to_vec());
    if v.is_empty() { 0.0 } else { v[((v.len() - 1) as f64 * 0.9).round() as usize] }
}

/// The smallest and the largest value.
pub fn range(values: &[f64]) -> (f64, f64) {
    let v = sorted(values.to_vec());
    (v.first().copied().unwrap_or(0.0), v.last().copied().unwrap_or(0.0))
}
