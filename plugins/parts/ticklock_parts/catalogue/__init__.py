"""The spot-price catalogue walk (``catalogue.spot_prices``): the parts catalogue, page by page, priced by
a vendor's API under its daily quota. ``walk`` is the loop; its ports are in ``ports``."""
