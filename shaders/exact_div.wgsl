// The inverse of a strided window walk (conv col2im, pooling backward): which output position a
// kernel tap lands on.

// t / s when t >= 0 and s divides it, else -1 (one division at most and none at stride 1: divisions
// are slow on some devices, e.g. CPU Vulkan drivers)
fn exact_div(t: i32, s: i32) -> i32 {
    if (t < 0) {
        return -1;
    }
    if (s == 1) {
        return t;
    }
    let q = t / s;
    return select(-1, q, q * s == t);
}
