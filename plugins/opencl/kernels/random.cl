// Philox4x32-10 (Salmon et al., SC'11), as bp::sdk::philox: element k of the
// output in row-major order takes the stream value (seed, offset + k). The
// walk is row-major and uncoalesced, so the linear index is that k.
inline uint4 philox4x32_10(ulong counter, ulong seed) {
  uint c0 = (uint)counter, c1 = (uint)(counter >> 32), c2 = 0, c3 = 0;
  uint k0 = (uint)seed, k1 = (uint)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint lo0 = 0xD2511F53u * c0, hi0 = mul_hi(0xD2511F53u, c0);
    const uint lo1 = 0xCD9E8D57u * c2, hi1 = mul_hi(0xCD9E8D57u, c2);
    const uint n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (uint4)(c0, c1, c2, c3);
}

// iarg: 0 uniform [0, 1), 1 standard normal; s0 the seed, s1 the offset.
__kernel void random(POINTWISE_ARGS) {
  BEGIN(1)
  const uint4 r = philox4x32_10((ulong)s1 + (ulong)i, (ulong)s0);
#ifdef HAS_FP64
  const double u01 = (double)((((ulong)r.x << 32) | r.y) >> 11) * (1.0 / 9007199254740992.0);
  if (iarg == 1) {
    const double u1 = 1.0 - u01;
    const double u2 = (double)((((ulong)r.z << 32) | r.w) >> 11) * (1.0 / 9007199254740992.0);
    T_STORE(o + p[0], (T_C)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)));
  } else {
    T_STORE(o + p[0], T_IS_DOUBLE ? (T_C)u01 : (T_C)((float)(r.x >> 8) * (1.0f / 16777216.0f)));
  }
#else
  // Without fp64 only uniform numbers are made (the host declines normal
  // ones: their definition needs 53-bit uniforms in double).
  T_STORE(o + p[0], (T_C)((float)(r.x >> 8) * (1.0f / 16777216.0f)));
#endif
}
