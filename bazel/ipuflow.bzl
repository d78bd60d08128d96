"""Build macros shared by every ipuflow package."""

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
