// Attributes that appertain to nothing r4c-gen wraps.
[[r4c::adaptive_limit]] int free_function();

class Fields {
 public:
  virtual ~Fields() = default;
  [[r4c::timeout("1s")]] int field = 0;
};

template <class T>
class [[r4c::adaptive_limit]] Generic {
 public:
  virtual ~Generic() = default;
  virtual T get() = 0;
};

class [[r4c::adaptive_limit]] Sealed final {
 public:
  virtual ~Sealed() = default;
  virtual int get() { return 1; }
};

class [[r4c::adaptive_limit]] Plain {
 public:
  int get() { return 1; }
};
