// q4_k, q5_k and q6_k rows to f32 a vector at a time (ops/simd.cpp's
// DequantRow: the --exact path and a client's f32 graph calls stream k-quant
// weights through it). Highway compiles simd.cpp once per target, and that
// file includes this one inside its per-target namespace, after HalfToFloat:
// there is no other way to include it.
//
// The values are bonfire::dequantize_row's bit for bit (core/dtype.cpp, as
// ggml rounds them). In q4_k and q5_k every product is exact (an f16 scale's
// 11 bits times a 6-bit scale and a 5-bit code fit f32's 24), so only the
// difference rounds, whether or not the compiler fuses it with the product;
// q6_k's are single products, in ggml's order.

// out[0, 32) = d * code - m for 32 codes: bytes of `q` (>> shift, & 0xF),
// plus 16 where bit `bit` of the bytes of `qh` is set (q5_k; none when qh is
// null). N must divide 32.
template <class D>
HWY_INLINE void K4SubBlock(D d, const uint8_t* q, int shift, const uint8_t* qh, uint8_t bit, float scale, float min,
                           float* out) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint8_t, D> d8;
  const int64_t N = hn::Lanes(d);
  const auto low = hn::Set(du, 0xF), vbit = hn::Set(du, bit), sixteen = hn::Set(du, 16);
  const auto vs = hn::Set(d, scale), vm = hn::Set(d, min);
  for (int64_t l = 0; l < 32; l += N) {
    auto code = hn::And(hn::ShiftRightSame(hn::PromoteTo(du, hn::LoadU(d8, q + l)), shift), low);
    if (qh) {
      const auto high = hn::And(hn::PromoteTo(du, hn::LoadU(d8, qh + l)), vbit);
      code = hn::Add(code, hn::IfThenElseZero(hn::Ne(high, hn::Zero(du)), sixteen));
    }
    hn::StoreU(hn::Sub(hn::Mul(vs, hn::ConvertTo(d, code)), vm), d, out + l);
  }
}

// Super-blocks of q4_k (qh null) or q5_k: pairs of 32-value sub-blocks, the
// low nibbles first, each with its 6-bit scale and min.
template <class D, class Block>
void DequantK4K5(D d, const Block* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float sd = HalfToFloat(&b[i].d), smin = HalfToFloat(&b[i].dmin);
    const uint8_t* q = b[i].qs;
    const uint8_t* qh = nullptr;
    if constexpr (std::is_same_v<Block, BlockQ5_K>) qh = b[i].qh;
    for (int j = 0; j < 8; j += 2, q += 32, y += 64) {
      uint8_t sc, mn;
      k4_scale_min(j, b[i].scales, &sc, &mn);
      K4SubBlock(d, q, 0, qh, static_cast<uint8_t>(1u << j), sd * sc, smin * mn, y);
      k4_scale_min(j + 1, b[i].scales, &sc, &mn);
      K4SubBlock(d, q, 4, qh, static_cast<uint8_t>(2u << j), sd * sc, smin * mn, y + 32);
    }
  }
}

// Super-blocks of q6_k: per half, 4 quarters of 32 values (low or high
// nibbles of ql, a bit pair of qh), each two 16-value sub-blocks with an
// int8 scale; value (d * scale) * (code - 32). N must divide 16.
template <class D>
void DequantQ6K(D d, const BlockQ6_K* b, int64_t nb, float* y) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, D> d8;
  const hn::RebindToUnsigned<D> du;
  const int64_t N = hn::Lanes(d);
  const auto low = hn::Set(du, 0xF), pair = hn::Set(du, 3);
  const auto bias = hn::Set(di, 32);
  for (int64_t i = 0; i < nb; ++i) {
    const float sd = HalfToFloat(&b[i].d);
    for (int half = 0; half < 2; ++half, y += 128) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      for (int quarter = 0; quarter < 4; ++quarter) {
        const uint8_t* nibbles = ql + (quarter & 1) * 32;
        const int shift = quarter < 2 ? 0 : 4;
        for (int64_t l = 0; l < 32; l += N) {
          const auto lo = hn::And(hn::ShiftRightSame(hn::PromoteTo(du, hn::LoadU(d8, nibbles + l)), shift), low);
          const auto hi = hn::And(hn::ShiftRightSame(hn::PromoteTo(du, hn::LoadU(d8, qh + l)), 2 * quarter), pair);
          const auto code = hn::Sub(hn::BitCast(di, hn::Or(lo, hn::ShiftLeft<4>(hi))), bias);
          const float scale = sd * sc[l / 16 + 2 * quarter];
          hn::StoreU(hn::Mul(hn::Set(d, scale), hn::ConvertTo(d, code)), d, y + 32 * quarter + l);
        }
      }
    }
  }
}

// Whether this target has the k-quant rows above for `t` (vectors of at most
// 16 floats), and then writes row's n values (a multiple of 256) to out.
template <class D>
bool DequantKQuant(D d, DType t, const void* row, float* out, int64_t n) {
  if (hn::Lanes(d) > 16) return false;
  switch (t) {
    case DType::Q4_K: DequantK4K5(d, static_cast<const BlockQ4_K*>(row), n / 256, out); return true;
    case DType::Q5_K: DequantK4K5(d, static_cast<const BlockQ5_K*>(row), n / 256, out); return true;
    case DType::Q6_K: DequantQ6K(d, static_cast<const BlockQ6_K*>(row), n / 256, out); return true;
    default: return false;
  }
}
