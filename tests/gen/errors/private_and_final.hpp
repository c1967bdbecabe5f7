// Interfaces the wrapper cannot implement, and methods the wrapper cannot override.
class Engine {
 public:
  virtual ~Engine() = default;
  [[r4c::adaptive_limit]]
  virtual int start() = 0;

 private:
  virtual int ignite() = 0;  // a delegate's private method cannot be forwarded
};

class Base {
 public:
  virtual ~Base() = default;
  virtual int run() { return 1; }
};

class Derived : public Base {
 public:
  [[r4c::bulkhead]]
  int run() final { return 2; }

 protected:
  [[r4c::timeout("1s")]]
  virtual int hidden() { return 3; }
};
