"""The outer rules of docs/training.md ("The outer rules"), element-wise in f32 in the order the
document gives, on flat vectors (a fragment is a boolean mask over the flat layout).

Every function takes the state tensors and updates them in place.
"""
import torch


def mean_of(deltas):
    """Δ̄ = (Σ Δ_m) / |S|: the sum, then one f32 division (never a multiplication by 1/|S|)."""
    total = deltas[0].clone()
    for d in deltas[1:]:
        total += d
    return total / torch.tensor(float(len(deltas)), dtype=torch.float32)


def nesterov(theta, buf, g, lr, mu, first):
    """DiLoCo's Nesterov outer SGD (PyTorch's SGD(momentum=mu, nesterov=True)):
    first round b <- g, later b <- mu*b + g; u <- g + mu*b; theta <- theta - lr*u."""
    mu_t = torch.tensor(mu, dtype=torch.float32)
    lr_t = torch.tensor(lr, dtype=torch.float32)
    if first:
        buf.copy_(g)
    else:
        buf.copy_((mu_t * buf) + g)
    u = g + (mu_t * buf)
    theta.sub_(lr_t * u)


def co2(theta, m, g, lr, beta, gap_penalty=1.0, clip=0.0):
    """CO2's update with the delayed average g: m <- clip(beta*m + g/lambda, phi);
    theta <- theta - alpha_o*m (lambda = 1: no penalty; phi = 0: no clipping)."""
    beta_t = torch.tensor(beta, dtype=torch.float32)
    gg = g if gap_penalty == 1.0 else g / torch.tensor(gap_penalty, dtype=torch.float32)
    m.copy_((beta_t * m) + gg)
    if clip > 0.0:
        m.clamp_(-clip, clip)
    theta.sub_(torch.tensor(lr, dtype=torch.float32) * m)


def eager_own(prev, dev, own_mom, fresh, share, lr, mu):
    """Eager's own part: d = (fresh - prev)*share; c <- mu*c + d; e <- e - lr*(d + mu*c);
    prev <- fresh (share = 1/N in f32)."""
    mu_t = torch.tensor(mu, dtype=torch.float32)
    d = (fresh - prev) * torch.tensor(share, dtype=torch.float32)
    own_mom.copy_((mu_t * own_mom) + d)
    dev.sub_(torch.tensor(lr, dtype=torch.float32) * (d + (mu_t * own_mom)))
    prev.copy_(fresh)
