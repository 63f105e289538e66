// The program of the README's "Using it from C++", byte for byte between the
// markers (readme_example_matches checks): built and run by CTest with good
// and bad backend flags (tests/CMakeLists.txt).
// README-BEGIN
#include <backplane/backplane.h>

#include <iostream>

int main(int argc, char** argv) {
  bp::init_from_args(argc, argv);  // --backend, --plugin-path, ...; --help lists them
  auto b = bp::arange(9).view({3, 3});
  b.index({bp::Slice(1, bp::None), bp::Slice(1, bp::None)}).zero_();
  std::cout << b << "\n";  // tensor([[0, 1, 2],
                           //         [3, 0, 0],
                           //         [6, 0, 0]])

  auto x = bp::tensor({1.0, 2.0, 3.0}).requires_grad_();
  (x * x).sum().backward();
  std::cout << x.grad() << "\n";  // tensor([2., 4., 6.])
}
// README-END
