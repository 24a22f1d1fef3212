"""Virtual Zarr indexes (Kerchunk references) over TESSERA tiles and year stores."""
