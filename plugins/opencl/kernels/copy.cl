// Casting copies from the dispatch dtype T (the source's) to every dtype:
// the host defines a role per destination dtype (bool_, int32, ..., named
// as bp::sdk::dtype_name with bool as bool_) and instantiates COPY_TO for
// each. To bool: x != 0; floating to integer truncates; integers wrap.
// Floating to a narrower integer goes through long (truncate, then wrap):
// a direct conversion saturates on some devices (-1.5 to uint8 is 0 on
// NVIDIA's OpenCL, 255 by the rule above).
#define COPY_TO(R)                                                                \
  __kernel void to_##R(POINTWISE_ARGS) {                                         \
    BEGIN(2)                                                                     \
    const T_C x = T_LOAD(a + p[1]);                                              \
    R##_STORE(o + p[0], R##_IS_BOOL    ? (R##_C)(x != (T_C)0)                     \
                        : R##_IS_FLOAT ? (R##_C)x                                 \
                                       : (R##_C)(long)x);                         \
  }
