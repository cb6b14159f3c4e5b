// Package images gives a sandbox the root filesystem of an OCI or Docker image,
// without a container daemon: a [Cache] pulls the image through
// github.com/google/go-containerregistry, unpacks it once into a content-addressed
// cache on disk, and hands out its root as a [bwrap.ImageRoot] (it implements
// [bwrap.RootSource], which the bubblewrap sandbox takes in its Config.Images).
//
//	c, err := images.NewCache(images.CacheConfig{}) // no I/O yet
//	r, err := c.Root(ctx, "registry.example/swe/django:v1")
//	defer r.Release() // when no sandbox uses the root any longer
//	// r.Dir is the root, read-only for everyone; r.Env, r.WorkingDir, r.User: the config
//
// # References
//
//   - "registry/repo:tag" and "registry/repo@sha256:…": pulled from the registry with
//     CacheConfig.Keychain (the docker config's credentials by default); a loopback
//     registry is spoken to in plain HTTP. A multi-platform index gives the image of
//     CacheConfig.Platform (linux on this machine's architecture by default).
//   - "oci-layout:/path[:tag|@sha256:…]": an OCI image layout directory; the tag is
//     the org.opencontainers.image.ref.name annotation of index.json; without either,
//     the layout must hold a single image.
//   - "docker-archive:/file.tar[:repo:tag]": a `docker save` tarball; the tag is
//     needed when it holds more than one image.
//
// A reference is resolved to its image once per Cache: the first Root of a tag asks
// the registry for its manifest (and fetches the layers only if no process has the
// image on disk); later Roots of the same reference ask nothing while the image
// stays on disk, so a thousand rollouts on one image make one manifest request, not
// a thousand against the registry's pull limits. A tag moved since is seen by a new
// Cache, or once the image has been evicted.
//
// # The cache on disk
//
// One unpacked tree per image, keyed by the image's id (the digest of its config,
// which names every layer by its DiffID):
//
//	Dir/roots/<id>/rootfs      the root filesystem
//	Dir/roots/<id>/meta.json   the config's Env, WorkingDir, User; the size; the reference
//	Dir/roots/<id>/used        its mtime: the last Root of the image, by any process
//	Dir/roots/<id>/derived/    what sandboxes derive from the pristine image and share
//	                           (ImageRoot.CacheDir: package sandbox's warm Go build cache)
//	Dir/locks/<id>.lock        the image's use lock (flock: shared while in use)
//	Dir/locks/<id>.unpack      its unpack lock (flock: exclusive while unpacking)
//	Dir/tmp/                   unpacks in progress, evictions being removed
//
// Per image rather than per layer: a sandbox binds one directory as its root, and a
// stack of per-layer directories would need an overlay mount for every sandbox (or a
// copy); images that share base layers store them once each. Layer blobs are not
// kept: an evicted image is downloaded again when it comes back.
//
// An image is unpacked into Dir/tmp and renamed into Dir/roots when complete, so a
// root in Dir/roots is always whole. A process takes the image's use lock shared
// before it looks for the root and keeps it while any Root of the image is in use
// (an evictor needs it exclusive, and only tries); to unpack, it takes the unpack
// lock exclusive as well, so processes sharing a Dir unpack each image once between
// them. No lock is ever converted from shared to exclusive (two waiting holders
// would wait for each other forever). flock locks go with the process that held
// them, so a process that dies (SIGKILL included) leaves no image locked, and what
// its unpack left in Dir/tmp is removed by the next unpack of that image or the next
// eviction.
//
// # Size bound and eviction
//
// CacheConfig.MaxBytes bounds the roots on disk (blocks, as du counts them). After
// each unpack, and when a root is released while the cache is over the bound, the
// least recently used roots that no process holds (their lock is free) are removed
// until the cache fits: renamed out of Dir/roots first, so no Root ever sees half a
// tree; its derived directory goes with it (it is not counted in MaxBytes). A root in
// use is never removed, by this process or another; the cache stays
// over the bound while they are, and says so at warn level. An image that alone
// passes MaxBytes is refused while it unpacks ([ErrTooLarge]). Lock files stay (a
// few bytes per image ever seen): removing a lock file another process may be
// opening would let two processes hold "the" lock at once.
//
// # Unpacking
//
// Layers are applied bottom first, with the OCI whiteouts: ".wh.<name>" removes name
// and ".wh..wh..opq" empties its directory, of what the layers below put there only
// (what the same layer writes stays, whichever comes first in the tar). An entry
// replaces what lower layers had at its name (a file, a symlink, a directory); a
// directory entry over a directory merges with it.
//
// No entry reaches outside the root:
//
//   - a name that climbs out of the root through ".." is refused with an error (a
//     leading "/" is dropped: layer names are relative to the root);
//   - symlinks are stored as they are (inside the sandbox, where the tree is "/", an
//     absolute target means the image's own file), and followed while unpacking only
//     as the kernel would after chroot(2): an absolute target starts again at the
//     root and ".." stops at it, so a later entry "evil/x" under "evil -> /etc"
//     lands in the root's etc, never the host's; more than 40 links in one path are
//     refused;
//   - an entry is never written through what is at its name: the old file or
//     symlink is removed first;
//   - a hard link must name a regular file (or symlink) already in the root, found
//     the same way; a target that climbs out, or is a directory, is refused;
//   - every operation goes through an [os.Root] on the tree, which refuses any path
//     that would leave it, as a second line behind the rules above.
//
// Character and block devices, FIFOs and sockets are not made (the sandbox mounts a
// minimal /dev of its own); the number skipped is logged. Setuid and setgid bits are
// dropped, and so are group and other write bits, so that no host user but the
// tree's owner can change a root every sandbox of the image reads, graders
// included (inside a sandbox the root is read-only and /tmp a tmpfs of its own);
// the sticky bit of directories stays. Extended attributes are ignored.
//
// Ownership: when the process runs as root, the whole tree belongs to
// CacheConfig.UID:GID, the sandbox's uid (65534, nobody, by default, as
// bwrap.Config's), so that the code in the sandbox reads every file of its image
// as the image's user would, /root/.bashrc and 0600 files included; every file is
// at least readable, and every directory searchable and writable, by its owner
// (the tree is mounted read-only, so write bits do not let the sandbox write).
// Without root, the tree belongs to the process's uid, which the sandbox then runs
// as too. How a sandbox reaches the tree is its own business (the bubblewrap
// sandbox mounts it as root, or without root in a user namespace as the process's
// uid, so Dir may be under a 0700 directory of the process's uid).
//
// What a `docker exec` gives that a root lacks (/etc/hosts with localhost, HOME,
// HOSTNAME, a login shell's environment) is the sandbox's to supply; this package
// returns the image's config as it is.
package images
