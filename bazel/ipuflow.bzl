"""Build macros shared by every ipuflow package."""

# Flags for every library that contains AVX-512 code (target attributes or
# --config=avx512): GCC 12.2's SLP vectoriser stores {1, 1, 1, 0} as a
# broadcast {1, 1, 1, 1} with AVX-512 enabled (tests/toolchain/
# gcc_avx512_slp_repro.cc); without SLP vectorisation it does not. The
# kernels themselves are written with intrinsics, so nothing else changes.
AVX512_COPTS = ["-fno-tree-slp-vectorize"]

def unity_srcs(name, srcs, per_unit = 16):
    """A library's sources compiled as a few larger translation units.

    Returns the files to give a cc_library as `srcs`: private headers as
    they are, and the `.cc` files concatenated, at most `per_unit` to a
    generated `<name>_<i>.cc`, each after a `#line 1 "path"` directive, so
    compiler messages, __FILE__ and debuggers still name the original file
    and line.

    Why: an op's file is mostly the headers every op parses (Abseil, Eigen,
    core/) and the templates every op instantiates (ops/cwise.h); ops/math's
    58 files compiled in 428 s of CPU as 58 units and in 111 s as one
    (docs/ARCHITECTURE.md, "The build"). The price: the files of one unit
    share their anonymous namespaces, so within a family an internal name
    (a helper, an enumerator) is defined once: a second definition is a
    compile error naming both files. A file whose names cannot be unique
    (an input-index enum) puts them in its own namespace
    (ops/state/apply_sgd.cc).
    """
    grouped = sorted([s for s in srcs if s.endswith(".cc")])
    rest = [s for s in srcs if s not in grouped]
    units = (len(grouped) + per_unit - 1) // per_unit
    outs = []
    for i in range(units):
        part = grouped[i * len(grouped) // units:(i + 1) * len(grouped) // units]
        out = "%s_unity_%d.cc" % (name, i)
        native.genrule(
            name = "%s_unity_%d" % (name, i),
            srcs = part,
            outs = [out],
            cmd = "for f in $(SRCS); do printf '#line 1 \"%s\"\\n' \"$$f\"; " +
                  "cat \"$$f\"; echo; done > $@",
        )
        outs.append(out)
    return outs + rest

def aliases(actual, names):
    """Old target names of concepts now compiled in `actual`'s library.

    A layer is one library compiled as few units (unity_srcs); each concept
    keeps its file and, through these, its target name, so a `deps` line
    still says what it uses.
    """
    for name in names:
        native.alias(name = name, actual = actual)

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
