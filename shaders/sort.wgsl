// argsort along one dim by ranking: one invocation per element counts the elements of its row that sort
// before it (ties broken by position, so the sort is stable) and writes its own index at that rank.
// O(n) work per element, O(n^2) per row: no shared memory or barriers, right for the short rows that
// sort/topk see in models (vocabularies of a few thousand still fit well). NaN sorts as the largest value.
// sort.py fills BINDINGS, VAL (compare type), LOAD(k) and LESS(a, b) / SAME(a, b).

struct Config {
    numel: u32,
    ndim: u32,
    row: u32,                       // invocations per grid row (grid.x * 256)
    dim: u32,
    n: u32,                         // size of the sorted dim
    descending: u32,
    offset_out: u32,
    offset_x: u32,
    shape: array<vec4<u32>, 2>,     // up to 8 dims
    strides: array<vec4<i32>, 8>,   // strides[d] = (out, x, 0, 0)
}

{{BINDINGS}}

fn value(k: i32) -> {{VAL}} {
    return {{LOAD}};
}

fn less(a: {{VAL}}, b: {{VAL}}) -> bool {
    return {{LESS}};
}

fn same(a: {{VAL}}, b: {{VAL}}) -> bool {
    return {{SAME}};
}

// sort.py puts strided_grid.wgsl (the launch, `main`) and dim_split.wgsl in front
fn run(i: u32) {
    let split = split_at_dim(i, vec4<i32>(i32(cfg.offset_out), i32(cfg.offset_x), 0, 0));
    let c = split.at;
    let off = split.off.xy;  // the row's start in out and x
    let s = cfg.strides[cfg.dim].xy;
    let mine = value(off.y + i32(c) * s.y);
    var rank = 0u;
    for (var e = 0u; e < cfg.n; e++) {
        let other = value(off.y + i32(e) * s.y);
        var first = select(less(other, mine), less(mine, other), cfg.descending != 0u);
        if (e < c && same(other, mine)) {
            first = true;
        }
        if (first) {
            rank += 1u;
        }
    }
    out0[u32(off.x + i32(rank) * s.x)] = vec2<u32>(c, 0u);
}
