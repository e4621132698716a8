//! A Zipf popularity over ranks `1..=n` (rank `k` drawn in proportion to `k^-s`), by
//! rejection-inversion (Hörmann and Derflinger, 1996, as Apache Commons RNG samples
//! it): O(1) per draw and no table, so ten million identities cost nothing to set up.

/// Draws ranks `1..=n` with probability proportional to `k^-s`.
#[derive(Debug, Clone)]
pub(super) struct Zipf {
    n: f64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    cut: f64,
}

impl Zipf {
    /// Ranks `1..=n` (n at least 1), exponent `s` (above 0).
    pub(super) fn new(n: u64, s: f64) -> Self {
        let n = n.max(1) as f64;
        let mut zipf = Self {
            n,
            s,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            cut: 0.0,
        };
        zipf.h_integral_x1 = zipf.h_integral(1.5) - 1.0;
        zipf.h_integral_n = zipf.h_integral(n + 0.5);
        zipf.cut = 2.0 - zipf.h_integral_inverse(zipf.h_integral(2.5) - zipf.h(2.0));
        zipf
    }

    /// A rank, from uniform draws in `[0, 1)`.
    pub(super) fn sample(&self, mut uniform: impl FnMut() -> f64) -> u64 {
        loop {
            let u = self.h_integral_n + uniform() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, exact near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, exact near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws against the exact probabilities, for exponents either side of 1.
    #[test]
    fn draws_follow_the_power_law() {
        for s in [0.8, 1.0, 1.3] {
            let n = 50u64;
            let zipf = Zipf::new(n, s);
            let mut rng = fastrand::Rng::with_seed(7);
            let draws = 200_000;
            let mut counts = vec![0u64; n as usize + 1];
            for _ in 0..draws {
                counts[zipf.sample(|| rng.f64()) as usize] += 1;
            }
            assert_eq!(counts[0], 0);
            let total: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            for k in [1u64, 2, 5, 20, 50] {
                let want = (k as f64).powf(-s) / total * draws as f64;
                let got = counts[k as usize] as f64;
                assert!(
                    (got - want).abs() < 5.0 * want.sqrt() + 5.0,
                    "s {s}, rank {k}: {got} drawn, {want:.0} expected"
                );
            }
        }
    }

    #[test]
    fn one_rank_is_always_drawn() {
        let zipf = Zipf::new(1, 1.0);
        let mut rng = fastrand::Rng::with_seed(1);
        assert!((0..100).all(|_| zipf.sample(|| rng.f64()) == 1));
    }
}
