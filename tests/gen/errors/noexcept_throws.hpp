// A noexcept method cannot report a rejection: only a retry (which throws nothing of its own)
// may wrap one.
class Cache {
 public:
  virtual ~Cache() = default;
  [[r4c::adaptive_limit]]
  virtual int get(int key) noexcept = 0;
  [[r4c::retry]]
  virtual int size() const noexcept = 0;
};

struct [[r4c::bulkhead(max_concurrent = 4)]] Clock {
  virtual ~Clock() = default;
  virtual long now() const noexcept { return 0; }
};
