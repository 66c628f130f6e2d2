// Residual connection: out = a + b.
// There is no backward kernel: the gradient of a residual stream is the identity, so the model
// keeps one gradient buffer for the whole stream and every branch's backward accumulates into it
// (no copies, no extra pass over memory).
#pragma once

namespace longhaul::train {

// a, b, out: (N) elementwise.
void residual_forward(float* out, const float* a, const float* b, long N);

}  // namespace longhaul::train
