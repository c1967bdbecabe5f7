// Not an error: attributes in branches the preprocessor skips are not read, however wrong.
class Quiet {
 public:
  virtual ~Quiet() = default;
#if 0
  [[r4c::adaptive_limit(initial_limit = 0, no_such_key = 1)]]
#elif defined(NOT_DEFINED_ANYWHERE)
  [[r4c::no_such_policy]]
#else
  [[r4c::adaptive_limit(initial_limit = 5, max_limit = 10)]]
#endif
  virtual int get() = 0;
};
