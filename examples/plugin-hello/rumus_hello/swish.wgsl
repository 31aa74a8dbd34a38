// hello_swish for the WebGPU backend. Bindings follow rumus_contracts.ShaderKernel:
// group 0 -- outputs first, then inputs, then the uniform buffer of `params`.
struct Params {
    numel: u32,
    out_offset: u32,
    in_offset: u32,
    beta: f32,
}

@group(0) @binding(0) var<storage, read_write> out_buf: array<f32>;
@group(0) @binding(1) var<storage, read> in_buf: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= params.numel) {
        return;
    }
    let x = in_buf[params.in_offset + i];
    out_buf[params.out_offset + i] = x / (1.0 + exp(-params.beta * x));
}
