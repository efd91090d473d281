// Time Pinocchio's C++ dynamics algorithms per state over a stack of states.
//
//   pinocchio_timing MODEL.bin STATES.bin REPEATS CLOCK [contacts=CONTACTS.bin] FUNCTION...
//
// MODEL.bin: the model that Python saved with pin.Model.saveToBinary.
// STATES.bin: int64 K, nq, nv, then float64 Q (K x nq), V, A, TAU (K x nv each),
// row-major.  CLOCK: "cpu" (the thread's CPU time) or "wall" (monotonic clock).
// CONTACTS.bin (for the constrained functions): int64 n, then per contact
// int64 size (3 or 6), int64 joint, float64 R (3 x 3, row-major) and p (3): a
// RigidConstraintModel of joint1 = joint at placement (R, p), joint2 = universe,
// LOCAL, solved with ProximalSettings(1e-12, 1e-12, mu = 0, 1 iteration).
// FUNCTION: rnea aba crba computeMinverse computeRNEADerivatives
// computeABADerivatives constraintDynamics computeConstraintDynamicsDerivatives
// (the latter times constraintDynamics followed by its derivatives, as a caller
// must run them).  Each repeat times every function once over the K states (the
// functions interleaved); the time of a repeat is divided by K.
// Prints one JSON object: per function the per-state times of the repeats in
// microseconds and a checksum (sum of |outputs| over the states; the upper
// triangle of the symmetric matrices, which is all Pinocchio fills) that the
// Python driver compares with Pinocchio's Python bindings.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "pinocchio/multibody.hpp"
#include "pinocchio/algorithm/aba-derivatives.hpp"
#include "pinocchio/algorithm/aba.hpp"
#include "pinocchio/algorithm/constrained-dynamics-derivatives.hpp"
#include "pinocchio/algorithm/constrained-dynamics.hpp"
#include "pinocchio/algorithm/crba.hpp"
#include "pinocchio/algorithm/rnea-derivatives.hpp"
#include "pinocchio/algorithm/rnea.hpp"
#include "pinocchio/serialization.hpp"

namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct States {
  std::int64_t K = 0, nq = 0, nv = 0;
  Matrix Q, V, A, TAU;
};

States read_states(const char * path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "cannot open the states file %s\n", path);
    std::exit(2);
  }
  States s;
  file.read(reinterpret_cast<char *>(&s.K), sizeof(std::int64_t));
  file.read(reinterpret_cast<char *>(&s.nq), sizeof(std::int64_t));
  file.read(reinterpret_cast<char *>(&s.nv), sizeof(std::int64_t));
  auto read = [&](Matrix & m, std::int64_t cols) {
    m.resize(s.K, cols);
    file.read(reinterpret_cast<char *>(m.data()), sizeof(double) * s.K * cols);
  };
  read(s.Q, s.nq);
  read(s.V, s.nv);
  read(s.A, s.nv);
  read(s.TAU, s.nv);
  if (!file) {
    std::fprintf(stderr, "the states file %s is shorter than its header says\n", path);
    std::exit(2);
  }
  return s;
}

using Contacts = PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pinocchio::RigidConstraintModel);
using ContactDatas = PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pinocchio::RigidConstraintData);

Contacts read_contacts(const char * path, const pinocchio::Model & model) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "cannot open the contacts file %s\n", path);
    std::exit(2);
  }
  std::int64_t n = 0;
  file.read(reinterpret_cast<char *>(&n), sizeof(std::int64_t));
  Contacts contacts;
  for (std::int64_t c = 0; c < n; ++c) {
    std::int64_t header[2];
    double values[12];
    file.read(reinterpret_cast<char *>(header), sizeof(header));
    file.read(reinterpret_cast<char *>(values), sizeof(values));
    if (!file || (header[0] != 3 && header[0] != 6) || header[1] <= 0
        || header[1] >= model.njoints) {
      std::fprintf(stderr, "the contacts file %s is malformed at contact %ld\n", path,
                   static_cast<long>(c));
      std::exit(2);
    }
    Eigen::Matrix3d R;
    R << values[0], values[1], values[2], values[3], values[4], values[5], values[6],
      values[7], values[8];
    const Eigen::Vector3d p(values[9], values[10], values[11]);
    contacts.emplace_back(header[0] == 3 ? pinocchio::CONTACT_3D : pinocchio::CONTACT_6D, model,
                          static_cast<pinocchio::JointIndex>(header[1]), pinocchio::SE3(R, p),
                          pinocchio::LOCAL);
  }
  return contacts;
}

double now(bool cpu) {
  timespec t;
  clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

template<typename M>
double upper_abs_sum(const Eigen::MatrixBase<M> & m) {
  double sum = 0.0;
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    for (Eigen::Index i = 0; i <= j && i < m.rows(); ++i)
      sum += std::abs(m(i, j));
  return sum;
}

}  // namespace

int main(int argc, char ** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: %s MODEL.bin STATES.bin REPEATS cpu|wall [contacts=FILE] FUNCTION...\n",
                 argv[0]);
    return 2;
  }
  pinocchio::Model model;
  model.loadFromBinary(argv[1]);
  const States s = read_states(argv[2]);
  const int repeats = std::atoi(argv[3]);
  const bool cpu = std::string(argv[4]) == "cpu";
  if (s.nq != model.nq || s.nv != model.nv) {
    std::fprintf(stderr, "the states (nq %ld, nv %ld) do not fit the model (nq %d, nv %d)\n",
                 static_cast<long>(s.nq), static_cast<long>(s.nv), model.nq, model.nv);
    return 2;
  }
  pinocchio::Data data(model);
  int first_function = 5;
  Contacts contacts;
  const std::string contacts_flag = "contacts=";
  if (std::string(argv[5]).compare(0, contacts_flag.size(), contacts_flag) == 0) {
    contacts = read_contacts(argv[5] + contacts_flag.size(), model);
    first_function = 6;
  }
  ContactDatas contact_datas;
  for (const auto & contact : contacts)
    contact_datas.emplace_back(contact);
  pinocchio::initConstraintDynamics(model, data, contacts, contact_datas);
  pinocchio::ProximalSettings settings(1e-12, 1e-12, 0.0, 1);
  // One state per call: q, v, a, tau copied out of the row-major stack as
  // Pinocchio's Python call receives them (contiguous column vectors).
  std::vector<Eigen::VectorXd> Q(s.K), V(s.K), A(s.K), TAU(s.K);
  for (std::int64_t k = 0; k < s.K; ++k) {
    Q[k] = s.Q.row(k).transpose();
    V[k] = s.V.row(k).transpose();
    A[k] = s.A.row(k).transpose();
    TAU[k] = s.TAU.row(k).transpose();
  }

  // Each function: the call on state k, and the checksum of its outputs.
  struct Function {
    std::string name;
    std::function<void(std::int64_t)> call;
    std::function<double()> outputs;
  };
  std::vector<Function> known = {
    {"rnea", [&](std::int64_t k) { pinocchio::rnea(model, data, Q[k], V[k], A[k]); },
     [&] { return data.tau.cwiseAbs().sum(); }},
    {"aba", [&](std::int64_t k) { pinocchio::aba(model, data, Q[k], V[k], TAU[k]); },
     [&] { return data.ddq.cwiseAbs().sum(); }},
    {"crba", [&](std::int64_t k) { pinocchio::crba(model, data, Q[k]); },
     [&] { return upper_abs_sum(data.M); }},
    {"computeMinverse", [&](std::int64_t k) { pinocchio::computeMinverse(model, data, Q[k]); },
     [&] { return upper_abs_sum(data.Minv); }},
    {"computeRNEADerivatives",
     [&](std::int64_t k) { pinocchio::computeRNEADerivatives(model, data, Q[k], V[k], A[k]); },
     [&] { return data.dtau_dq.cwiseAbs().sum() + data.dtau_dv.cwiseAbs().sum(); }},
    {"computeABADerivatives",
     [&](std::int64_t k) { pinocchio::computeABADerivatives(model, data, Q[k], V[k], TAU[k]); },
     [&] { return data.ddq_dq.cwiseAbs().sum() + data.ddq_dv.cwiseAbs().sum(); }},
    {"constraintDynamics",
     [&](std::int64_t k) {
       pinocchio::constraintDynamics(model, data, Q[k], V[k], TAU[k], contacts, contact_datas,
                                     settings);
     },
     [&] { return data.ddq.cwiseAbs().sum() + data.lambda_c.cwiseAbs().sum(); }},
    {"computeConstraintDynamicsDerivatives",
     [&](std::int64_t k) {
       pinocchio::constraintDynamics(model, data, Q[k], V[k], TAU[k], contacts, contact_datas,
                                     settings);
       pinocchio::computeConstraintDynamicsDerivatives(model, data, contacts, contact_datas,
                                                       settings);
     },
     [&] {
       return data.ddq_dq.cwiseAbs().sum() + data.ddq_dv.cwiseAbs().sum()
              + data.ddq_dtau.cwiseAbs().sum() + data.dlambda_dq.cwiseAbs().sum()
              + data.dlambda_dv.cwiseAbs().sum() + data.dlambda_dtau.cwiseAbs().sum();
     }},
  };
  std::vector<Function> chosen;
  for (int i = first_function; i < argc; ++i) {
    auto found = std::find_if(known.begin(), known.end(),
                              [&](const Function & f) { return f.name == argv[i]; });
    if (found == known.end()) {
      std::fprintf(stderr, "unknown function %s\n", argv[i]);
      return 2;
    }
    if (found->name.find("onstraint") != std::string::npos && contacts.empty()) {
      std::fprintf(stderr, "%s needs contacts=FILE before the functions\n", argv[i]);
      return 2;
    }
    chosen.push_back(*found);
  }

  std::vector<double> checksums(chosen.size(), 0.0);
  for (std::size_t f = 0; f < chosen.size(); ++f)  // warm-up pass, and the checksums
    for (std::int64_t k = 0; k < s.K; ++k) {
      chosen[f].call(k);
      checksums[f] += chosen[f].outputs();
    }
  std::vector<std::vector<double>> times(chosen.size());
  for (int r = 0; r < repeats; ++r)
    for (std::size_t f = 0; f < chosen.size(); ++f) {
      const double start = now(cpu);
      for (std::int64_t k = 0; k < s.K; ++k)
        chosen[f].call(k);
      times[f].push_back((now(cpu) - start) / s.K * 1e6);
    }

  std::printf("{");
  for (std::size_t f = 0; f < chosen.size(); ++f) {
    std::printf("%s\"%s\": {\"checksum\": %.17g, \"us\": [", f ? ", " : "",
                chosen[f].name.c_str(), checksums[f]);
    for (std::size_t r = 0; r < times[f].size(); ++r)
      std::printf("%s%.6g", r ? ", " : "", times[f][r]);
    std::printf("]}");
  }
  std::printf("}\n");
  return 0;
}
