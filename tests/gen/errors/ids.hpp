// Not an error: method ids spell parameter types fully qualified, keeping the names the header wrote.
#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shop {

struct Order {};
using Orders = std::vector<Order>;
enum class Priority { low, high };
namespace detail {
struct Token {};
}  // namespace detail

using namespace std;

// clang-format off
class Ids {
 public:
  virtual ~Ids() = default;
  [[r4c::bulkhead]]
  virtual void a(const string& s, Order o, unique_ptr<Order> p) = 0;
  [[r4c::bulkhead]]
  virtual void b(const Orders& os, map<string, vector<Order>> m) = 0;
  [[r4c::bulkhead]]
  virtual void c(const Order* p, Order* const q, Priority pr, detail::Token t) = 0;
  [[r4c::bulkhead]]
  virtual void d(int (*callback)(int), std::size_t n, unsigned long long u) = 0;
  [[r4c::bulkhead]]
  virtual void e(array<int, 3> xs) const & = 0;
  [[r4c::bulkhead]]
  virtual Order operator()(int x) = 0;
};
// clang-format on

}  // namespace shop
