"""ZooKeeper sessions as actors (seed 004): a kazoo client owned by an actor that answers the kernel's
ZooKeeper session protocol (``conveyor.runtime.lowlevel.ZkCall`` and the rest), so nothing that uses
ZooKeeper blocks a handler or shares the client."""
