#version 450
// G[i] = act(G[i]) * U[i] over count elements: act 0 SiLU, 1 GELU (tanh form), 2 GELU (erf).
layout(std430, set = 0, binding = 0) buffer GBuf { float gv[]; };
layout(std430, set = 1, binding = 0) readonly buffer UBuf { float uv[]; };
layout(push_constant) uniform Push { uint count, act, g_off, u_off; } pc;
layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

// erf by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7): GLSL has no erf.
float erf_as(float x) {
    float s = sign(x), a = abs(x);
    float t = 1.0 / (1.0 + 0.3275911 * a);
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
    return s * y;
}

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= pc.count) return;
    float x = gv[pc.g_off + i], a;
    if (pc.act == 0u) a = x / (1.0 + exp(-x));
    else if (pc.act == 1u) a = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    else a = 0.5 * x * (1.0 + erf_as(x * 0.7071067811865476));
    gv[pc.g_off + i] = a * uv[pc.u_off + i];
}
