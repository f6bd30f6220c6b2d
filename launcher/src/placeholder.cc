namespace acc::launcher {}
