# SPDX-License-Identifier: Apache-2.0
"""Images the tests build themselves: tar layers (crafted or plain), OCI
image layouts (one platform, or a multi-arch index) and docker-save
archives. Standard library only; no registry, no network."""
import gzip
import lzma
import hashlib
import io
import json
import os
import tarfile


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def entry(name, data=b"", mode=0o644, type=tarfile.REGTYPE, linkname="", uid=0, gid=0,
          devmajor=0, devminor=0, size=None):
    """One tar member: (TarInfo, data)."""
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.uid, ti.gid = type, mode, uid, gid
    ti.linkname, ti.devmajor, ti.devminor = linkname, devmajor, devminor
    ti.mtime = 1700000000
    ti.size = len(data) if size is None else size
    return ti, data


def d(name, mode=0o755, **kw):
    return entry(name, mode=mode, type=tarfile.DIRTYPE, **kw)


def f(name, data=b"x", mode=0o644, **kw):
    return entry(name, data=data if isinstance(data, bytes) else data.encode(), mode=mode, **kw)


def sym(name, target):
    return entry(name, type=tarfile.SYMTYPE, linkname=target, mode=0o777)


def hard(name, target):
    return entry(name, type=tarfile.LNKTYPE, linkname=target)


def tar(entries):
    """The uncompressed tar of entries, written verbatim (no name checks)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if ti.isreg() and data else None)
    return buf.getvalue()


def gz(data):
    return gzip.compress(data, mtime=0)


def xz(data):
    """xz with its default CRC64 check (liblzma's, dispatched by its
    constructor: base/libinit.c)."""
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)


def config(diff_ids, env=None, arch="amd64", workdir=None):
    c = {"architecture": arch, "os": "linux",
         "config": {"Env": env or ["PATH=/usr/local/bin:/usr/bin:/bin"]},
         "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    if workdir:
        c["config"]["WorkingDir"] = workdir
    return json.dumps(c).encode()


def _blob(root, data):
    digest = sha(data)
    os.makedirs(os.path.join(root, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(root, "blobs", "sha256", digest[7:]), "wb") as fh:
        fh.write(data)
    return digest


def _manifest(root, layers, env=None, arch="amd64", compress=True, corrupt=None):
    """Blobs of one image; returns the manifest's descriptor."""
    descs, diff_ids = [], []
    for raw in layers:
        blob = xz(raw) if compress == "xz" else gz(raw) if compress else raw
        diff_ids.append(sha(raw))
        digest = _blob(root, blob)
        mt = "application/vnd.oci.image.layer.v1.tar" + (
            "+xz" if compress == "xz" else "+gzip" if compress else "")
        descs.append({"mediaType": mt, "digest": digest, "size": len(blob)})
    cfg = config(diff_ids, env, arch)
    cdig = _blob(root, cfg)
    if corrupt is not None:
        # The layer's bytes change, the manifest keeps the old digest.
        path = os.path.join(root, "blobs", "sha256", descs[corrupt]["digest"][7:])
        with open(path, "wb") as fh:
            fh.write(gz(layers[corrupt] + b"\0" * 1024) if compress else layers[corrupt] + b"\0" * 1024)
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": cdig, "size": len(cfg)},
                      "layers": descs}).encode()
    return {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _blob(root, man),
            "size": len(man), "platform": {"os": "linux", "architecture": arch}}


def _index(root, manifests):
    with open(os.path.join(root, "oci-layout"), "w") as fh:
        json.dump({"imageLayoutVersion": "1.0.0"}, fh)
    with open(os.path.join(root, "index.json"), "w") as fh:
        json.dump({"schemaVersion": 2, "manifests": manifests}, fh)


def layout(root, layers, env=None, tag="latest", compress=True, corrupt=None):
    """An OCI image layout of one linux/amd64 image."""
    m = _manifest(root, layers, env, "amd64", compress, corrupt)
    m["annotations"] = {"org.opencontainers.image.ref.name": tag}
    _index(root, [m])
    return root


def multiarch_layout(root, per_arch, tag="latest"):
    """A layout whose index.json names a nested index of one image per
    architecture (as 'skopeo copy --all' writes): {arch: [layers]}."""
    ms = [_manifest(root, layers, None, arch) for arch, layers in per_arch.items()]
    nested = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                         "manifests": ms}).encode()
    _index(root, [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": _blob(root, nested),
                   "size": len(nested), "annotations": {"org.opencontainers.image.ref.name": tag}}])
    return root


def docker_archive(path, layers, env=None):
    """A 'docker save' archive (the legacy format: <id>/layer.tar)."""
    diff_ids = [sha(raw) for raw in layers]
    cfg = config(diff_ids, env)
    members = [(f"{sha(cfg)[7:]}.json", cfg)]
    names = []
    for raw in layers:
        name = f"{sha(raw)[7:]}/layer.tar"
        names.append(name)
        members.append((name, raw))
    man = json.dumps([{"Config": members[0][0], "RepoTags": ["test:latest"], "Layers": names}]).encode()
    members.append(("manifest.json", man))
    with tarfile.open(path, "w") as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    return path


def whiteout_layers():
    """Two layers to stack over a root: the second whites out data/b and
    /gone and makes data/sub opaque, so the image has /data/{a,c,sub},
    data/a "a2", data/c "c3", data/sub only y, /keep "k" and no /gone."""
    l2 = tar([d("data"), f("data/a", "a2"), f("data/b", "b2"), f("data/c", "c2"),
              d("data/sub"), f("data/sub/x", "x2"), f("gone", "g"), f("keep", "k")])
    l3 = tar([d("data"), f("data/.wh.b", ""), f("data/c", "c3"), d("data/sub"),
              f("data/sub/.wh..wh..opq", ""), f("data/sub/y", "y3"), f(".wh.gone", "")])
    return l2, l3
