// Any other invalid value: R4C-REG-001, as the library says it.
class Payments {
 public:
  virtual ~Payments() = default;
  [[r4c::circuit_breaker(failure_rate_threshold = 150)]]
  virtual int charge(int cents) = 0;
  [[r4c::rate_limiter(limit_for_period = 10000000)]]
  virtual int refund(int cents) = 0;
};
