"""fusedbench: what fusing work into a matmul (cuBLASLt epilogs) buys on your GPU.

`import fusedbench` needs no GPU: the catalog, the float64 references and the CLI import only
numpy; everything that touches CUDA lives in `fusedbench.measure.gpu` and is imported lazily.
"""

__version__ = "0.1.0"
