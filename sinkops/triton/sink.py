"""The sink fold, written once for every Triton kernel here (docs/DESIGN.md §1)."""
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def finish_rows(m, l, sink_log2, NULL_SINK: tl.constexpr):
    """The end of an online softmax in log2 units (m: running max of the logits times log2(e),
    -inf for a row that saw no key; l: sum of 2^(x - m)) -> (factor for the un-normalized
    accumulator, lse in natural log, sink excluded). NULL_SINK folds 2^(s - m) into the
    denominator: s = -inf is skipped, so the result is bitwise the no-sink one; s = +inf makes the
    factor 0, a zero row with a finite lse. A row that saw no key: factor 0, lse +inf."""
    seen = l > 0.0
    m_safe = tl.where(seen, m, 0.0)
    l_safe = tl.where(seen, l, 1.0)
    den = l_safe
    if NULL_SINK:
        den = tl.where(sink_log2 == float("-inf"), l_safe, l_safe + tl.math.exp2(sink_log2 - m_safe))
    factor = tl.where(seen, 1.0 / den, 0.0)
    lse = tl.where(seen, (m_safe + tl.math.log2(l_safe)) * 0.6931471805599453, float("inf"))
    return factor, lse
