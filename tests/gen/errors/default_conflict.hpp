// Not an error, a warning: max_limit 10 is below the built-in initial_limit (20), which the
// registry's defaults or a named config may still change.
class Small {
 public:
  virtual ~Small() = default;
  [[r4c::adaptive_limit(max_limit = 10)]]
  virtual int get() = 0;
};
