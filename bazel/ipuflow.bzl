"""Build macros shared by every ipuflow package."""

# Flags for every library that contains AVX-512 code (target attributes or
# --config=avx512): GCC 12.2's SLP vectoriser stores {1, 1, 1, 0} as a
# broadcast {1, 1, 1, 1} with AVX-512 enabled (tests/toolchain/
# gcc_avx512_slp_repro.cc); without SLP vectorisation it does not. The
# kernels themselves are written with intrinsics, so nothing else changes.
AVX512_COPTS = ["-fno-tree-slp-vectorize"]

def ipuflow_proto(name, src, deps = [], visibility = None):
    """C++ code for one .proto file: protoc in a genrule, then a cc_library.

    Debian ships protoc and libprotobuf but no Bazel rules for them, so the
    generated sources are built like any other library.
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_proto_srcs" for d in deps],
        outs = [base + ".pb.h", base + ".pb.cc"],
        cmd = "protoc --proto_path=. --cpp_out=$(GENDIR) %s/%s" % (pkg, src),
    )
    native.filegroup(name = name + "_proto_srcs", srcs = [src])
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        deps = deps + ["@system//:protobuf"],
        copts = ["-Wno-unused-parameter"],
        visibility = visibility,
    )

def ipuflow_fuzzer(name, srcs, deps = [], corpus = None):
    """A fuzz target (core/testing/fuzz.h) built two ways.

    `name`: the libFuzzer binary, tagged manual; build it with clang:
        bazel --output_base=/tmp/bazel_fuzz build --config=fuzz //core:graph_def_fuzzer
    (tests/fuzz/run_fuzzers.sh builds and runs them all).
    `name + "_lib"`: the entry point registered by name, linked into
    //tests/fuzz:fuzz_regression_test, which runs it over `corpus` (a folder
    of seed inputs and crash reproducers, exported as `name + "_corpus"`).
    """
    fuzz_deps = deps + ["//core/testing:fuzz"]
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = fuzz_deps,
        alwayslink = True,
    )
    native.filegroup(
        name = name + "_corpus",
        testonly = True,
        srcs = native.glob([corpus + "/*"]) if corpus else [],
    )
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        deps = fuzz_deps,
        local_defines = ["IPUFLOW_LIBFUZZER"],
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
    )
