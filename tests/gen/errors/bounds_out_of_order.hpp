// R4C-ATR-009: bounds out of order, or a window out of range.
class Limits {
 public:
  virtual ~Limits() = default;
  [[r4c::adaptive_limit(min_limit = 50, initial_limit = 20)]]
  virtual int a() = 0;
  [[r4c::adaptive_limit(window = "2h")]]
  virtual int b() = 0;
  [[r4c::retry(wait = "2s", exponential_backoff_multiplier = 2, max_wait = "1s")]]
  virtual int c() = 0;
};
