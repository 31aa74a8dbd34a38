// The dropout mask's counter-based hash (rumus_contracts/ops/nn.py, csrc/nn_dropout.c): element
// `counter` is kept when mix32(mix32(counter ^ key) + key) >= threshold, with key =
// mix32(seed ^ 0x9E3779B9) worked out on the host. u32 arithmetic wraps, as in C, so a seed gives the
// same mask on every backend; the dropout op and FlashAttention's dropout both use it.

fn mix32(v: u32) -> u32 {
    var h = v;
    h ^= h >> 16u;
    h *= 0x21F0AAADu;
    h ^= h >> 15u;
    h *= 0x735A2D97u;
    h ^= h >> 15u;
    return h;
}

fn dropout_keep(counter: u32, key: u32, threshold: u32) -> bool {
    return mix32(mix32(counter ^ key) + key) >= threshold;
}
