// R4C-ATR-003: a limit below 1.
class Pool {
 public:
  virtual ~Pool() = default;
  [[r4c::adaptive_limit(initial_limit = 0)]]
  virtual int take() = 0;
  [[r4c::bulkhead(max_concurrent = -2)]]
  virtual int give() = 0;
};
